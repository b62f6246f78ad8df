package audit_test

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// problems renders a SetReport's problems without the temp dir: a chain
// break as "FILE line N seq S: reason", a checkpoint as "head line N:
// reason".
func problems(rep audit.SetReport) []string {
	var out []string
	for _, p := range rep.Problems {
		var be *audit.BreakError
		var he *audit.HeadError
		switch {
		case errors.As(p, &be):
			out = append(out, fmt.Sprintf("%s line %d seq %d: %s", filepath.Base(be.File), be.Line, be.Seq, be.Reason))
		case errors.As(p, &he):
			out = append(out, fmt.Sprintf("head line %d: %s", he.Head.Line, he.Reason))
		default:
			out = append(out, "unknown problem: "+p.Error())
		}
	}
	return out
}

// replaceIn replaces old by new once in the file at path.
func replaceIn(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(data, []byte(old)) {
		t.Fatalf("%s does not contain %q", path, old)
	}
	if err := os.WriteFile(path, bytes.Replace(data, []byte(old), []byte(new), 1), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestVerifySetNamesEachProblem(t *testing.T) {
	t.Parallel()
	// The set is PATH.000000000001 (seq 1), PATH.000000000002 (seq 2-3),
	// PATH.000000000004 (seq 4-5) and PATH (seq 6-7).
	const (
		c1 = "audit.jsonl.000000000001"
		c2 = "audit.jsonl.000000000002"
		c4 = "audit.jsonl.000000000004"
	)
	tests := []struct {
		name string
		opts audit.Options
		// files changes the set and returns the files to verify, given the
		// active file's path; nil means those Files lists.
		files   func(t *testing.T, path string) []audit.File
		partial bool
		want    []string
	}{
		{
			name: "an intact set verifies",
		},
		{
			name: "an intact compressed set verifies",
			opts: audit.Options{Compress: true},
		},
		{
			name: "a missing middle file is named with its seqs",
			files: func(t *testing.T, path string) []audit.File {
				os.Remove(path + ".000000000002")
				return nil
			},
			want: []string{c4 + " line 1 seq 4: seq 2-3 missing: it follows " + c2 + ", which is not in the set"},
		},
		{
			name: "a missing first file that no rotate line pruned",
			files: func(t *testing.T, path string) []audit.File {
				os.Remove(path + ".000000000001")
				return nil
			},
			want: []string{c2 + " line 1 seq 2: seq 1 missing: the set starts after " + c1 + ", which is not in it, and no rotate line records it as pruned"},
		},
		{
			name: "a set that starts after seq 1 passes with partial",
			files: func(t *testing.T, path string) []audit.File {
				return []audit.File{audit.FileAt(path + ".000000000004"), audit.FileAt(path)}
			},
			partial: true,
		},
		{
			name: "a file whose first lines were cut is missing its seqs",
			files: func(t *testing.T, path string) []audit.File {
				lines := readLines(t, path+".000000000002")
				os.WriteFile(path+".000000000002", join(lines[1:]...), 0o600)
				return nil
			},
			want: []string{
				c2 + " line 1 seq 3: its name says it starts at seq 2, but its first line has seq 3",
				c2 + " line 1 seq 3: seq 2 missing between $DIR/" + c1 + " line 1 and this file",
			},
		},
		{
			name: "a closed file whose last line was cut is missing its seq",
			files: func(t *testing.T, path string) []audit.File {
				lines := readLines(t, path+".000000000004")
				os.WriteFile(path+".000000000004", join(lines[0]), 0o600)
				return nil
			},
			want: []string{"audit.jsonl line 1 seq 6: seq 5 missing between $DIR/" + c4 + " line 1 and this file"},
		},
		{
			name: "two files whose names were swapped",
			files: func(t *testing.T, path string) []audit.File {
				os.Rename(path+".000000000002", path+".tmp")
				os.Rename(path+".000000000004", path+".000000000002")
				os.Rename(path+".tmp", path+".000000000004")
				return nil
			},
			want: []string{
				c2 + " line 1 seq 4: its name says it starts at seq 2, but its first line has seq 4",
				c2 + " line 1 seq 4: seq 2-3 missing: it follows " + c2 + ", the name it has itself: a renamed file",
				c4 + " line 1 seq 2: its name says it starts at seq 4, but its first line has seq 2",
				c4 + " line 1 seq 2: it starts at seq 2, but the chain already reached seq 5 in $DIR/" + c2 + ": a duplicated or reordered file",
			},
		},
		{
			name: "files given out of order",
			files: func(t *testing.T, path string) []audit.File {
				return []audit.File{audit.FileAt(path + ".000000000001"), audit.FileAt(path + ".000000000004"), audit.FileAt(path + ".000000000002"), audit.FileAt(path)}
			},
			want: []string{
				c4 + " line 1 seq 4: seq 2-3 missing: it follows " + c2 + ", which comes later in the list: the files are out of order",
				c2 + " line 1 seq 2: it starts at seq 2, but the chain already reached seq 5 in $DIR/" + c4 + ": a duplicated or reordered file",
			},
		},
		{
			name: "a file given twice",
			files: func(t *testing.T, path string) []audit.File {
				return []audit.File{audit.FileAt(path + ".000000000001"), audit.FileAt(path + ".000000000002"), audit.FileAt(path + ".000000000002"), audit.FileAt(path + ".000000000004"), audit.FileAt(path)}
			},
			want: []string{c2 + " line 1 seq 2: it starts at seq 2 like $DIR/" + c2 + ": a duplicated file"},
		},
		{
			name: "a compressed copy next to its file",
			files: func(t *testing.T, path string) []audit.File {
				gzipFile(t, path+".000000000002", path+".000000000002.gz")
				return nil
			},
			want: []string{c2 + ".gz line 1 seq 2: it starts at seq 2 like $DIR/" + c2 + ": a duplicated file"},
		},
		{
			name: "an edited last line of a closed file is caught at the next file",
			files: func(t *testing.T, path string) []audit.File {
				replaceIn(t, path+".000000000002", `"d_2"`, `"d_X"`)
				return nil
			},
			want: []string{c4 + " line 1 seq 4: prev hash does not match the last line of $DIR/" + c2 + " (line 2)"},
		},
		{
			name: "an edited rotate line is caught at the next line",
			files: func(t *testing.T, path string) []audit.File {
				replaceIn(t, path+".000000000004", `"prev_file":"`+c2, `"prev_file":"`+c1)
				return nil
			},
			want: []string{c4 + " line 2 seq 5: prev hash does not match line 1"},
		},
		{
			name: "an emptied file in the middle",
			opts: audit.Options{Compress: true},
			files: func(t *testing.T, path string) []audit.File {
				os.Remove(path + ".000000000002.gz")
				os.WriteFile(path+".000000000002", nil, 0o600)
				return nil
			},
			want: []string{
				c2 + " line 1 seq 0: the file is empty",
				c4 + ".gz line 1 seq 4: seq 2-3 missing between $DIR/" + c1 + ".gz line 1 and this file",
			},
		},
		{
			name: "a compressed file whose checksum does not match",
			opts: audit.Options{Compress: true},
			files: func(t *testing.T, path string) []audit.File {
				p := path + ".000000000002.gz"
				data, _ := os.ReadFile(p)
				data[len(data)-8] ^= 1 // the CRC-32 in the trailer
				os.WriteFile(p, data, 0o600)
				return nil
			},
			want: []string{c2 + ".gz line 3 seq 0: compressed data is corrupt: gzip: invalid checksum"},
		},
		{
			name: "a log whose first line is neither seq 1 nor a rotate line",
			files: func(t *testing.T, path string) []audit.File {
				lines := readLines(t, path+".000000000002")
				os.WriteFile(path+".000000000002", join(lines[1:]...), 0o600)
				return []audit.File{{Path: path + ".000000000002"}, audit.FileAt(path + ".000000000004")}
			},
			want: []string{c2 + " line 1 seq 3: seq 1-2 missing: the log's first line is neither seq 1 nor a rotate line"},
		},
		{
			name: "a line that is not a record and the line after it",
			files: func(t *testing.T, path string) []audit.File {
				lines := readLines(t, path)
				os.WriteFile(path, join(lines[0], []byte("garbage"), lines[1]), 0o600)
				return nil
			},
			want: []string{"audit.jsonl line 2 seq 0: line is not a JSON record"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := rotatedSet(t, dir, 4, tc.opts)
			var files []audit.File
			if tc.files != nil {
				files = tc.files(t, path)
			}
			if files == nil {
				var err error
				if files, err = audit.Files(path); err != nil {
					t.Fatal(err)
				}
			}
			rep, err := audit.VerifySet(files, audit.VerifyOptions{Partial: tc.partial})
			got := problems(rep)
			for i := range got {
				got[i] = string(bytes.ReplaceAll([]byte(got[i]), []byte(dir), []byte("$DIR")))
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  %q\nwant:\n  %q", got, tc.want)
			}
			if (err != nil) != (len(tc.want) > 0) || err != nil && !errors.Is(err, audit.ErrBroken) {
				t.Errorf("VerifySet error = %v, want one wrapping ErrBroken exactly when there are problems", err)
			}
			var fileProblems int
			for _, f := range rep.Files {
				fileProblems += f.Problems
			}
			if fileProblems != len(tc.want) {
				t.Errorf("the file reports count %d problems, want %d", fileProblems, len(tc.want))
			}
		})
	}
}

func TestVerifySetOfAnEmptyLog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeRecords(t, path, audit.Options{}, 1, 0)
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	rep, err := audit.VerifySet(files, audit.VerifyOptions{})
	if err != nil || rep.Lines != 0 || rep.LastSeq != 0 || rep.LastHash != zeroHash || len(rep.Files) != 1 {
		t.Errorf("VerifySet of an empty log = %+v, %v; want one file, no lines, zero hash", rep, err)
	}
}

func TestVerifySetListsAtMostAHundredProblems(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	var b bytes.Buffer
	for range 150 {
		b.WriteString("garbage\n")
	}
	os.WriteFile(path, b.Bytes(), 0o600)
	rep, err := audit.VerifySet([]audit.File{{Path: path}}, audit.VerifyOptions{})
	if len(rep.Problems) != 100 || rep.MoreProblems != 50 || rep.Files[0].Problems != 150 || err == nil {
		t.Errorf("VerifySet of 150 bad lines lists %d problems and counts %d more (file: %d), err %v; want 100, 50 more, 150", len(rep.Problems), rep.MoreProblems, rep.Files[0].Problems, err)
	}
}
