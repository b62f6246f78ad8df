package audit_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// clock is a test clock that steps one millisecond per call and can be
// moved on by hand.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)} }

func (c *clock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(time.Millisecond)
	return c.t
}

func (c *clock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

// decision is the record the rotation tests write, numbered by i.
func decision(i int) audit.Record {
	return audit.Record{
		Kind: audit.KindDecision, DecisionID: fmt.Sprintf("d_%d", i), Tool: "Bash", Decision: "allow",
		Rule: "bash.readonly", Reason: "read-only command", ToolInput: map[string]any{"command": "ls -la"},
	}
}

// writeRecords opens the log at path with opts, writes records first to
// first+n-1, and closes it.
func writeRecords(t *testing.T, path string, opts audit.Options, first, n int) {
	t.Helper()
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for i := first; i < first+n; i++ {
		if err := l.Write(decision(i)); err != nil {
			t.Fatalf("Write %d: %v", i, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

// record is a line of a log as the tests read it.
type record struct {
	audit.Record
	raw []byte
}

// readSet reads every line of files with audit.Lines, failing the test on
// a read error.
func readSet(t *testing.T, files []audit.File) map[string][]record {
	t.Helper()
	out := map[string][]record{}
	for line, err := range audit.Lines(files) {
		if err != nil {
			t.Fatalf("Lines: %v", err)
		}
		var r audit.Record
		if err := json.Unmarshal(line.Text, &r); err != nil {
			t.Fatalf("%s line %d does not decode: %v", line.File.Path, line.Number, err)
		}
		out[line.File.Path] = append(out[line.File.Path], record{Record: r, raw: line.Text})
	}
	return out
}

func names(files []audit.File) []string {
	var out []string
	for _, f := range files {
		out = append(out, filepath.Base(f.Path))
	}
	return out
}

// checkRotatedSet checks what a rotated log must be: every closed file
// named after its first seq, every file after the first starting with a
// rotate line that names the file before and chains onto its last line,
// the records 1..n in order, and VerifySet passing. It returns the files.
func checkRotatedSet(t *testing.T, path string, n int, wantReason string) []audit.File {
	t.Helper()
	files, err := audit.Files(path)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	lines := readSet(t, files)
	var ids []string
	for i, f := range files {
		recs := lines[f.Path]
		if len(recs) == 0 {
			t.Fatalf("%s has no lines", f.Path)
		}
		if f.Seq != 0 && recs[0].Seq != f.Seq {
			t.Errorf("%s starts at seq %d, its name says %d", f.Path, recs[0].Seq, f.Seq)
		}
		if i == len(files)-1 && f.Path != path {
			t.Errorf("the last file of the set is %s, want the active file %s", f.Path, path)
		}
		if i > 0 {
			prev := lines[files[i-1].Path]
			last := prev[len(prev)-1]
			rot := recs[0]
			if rot.Kind != audit.KindRotate || rot.PrevFile != files[i-1].Name() || rot.Seq != last.Seq+1 || rot.Prev != hashOf(last.raw) {
				t.Errorf("%s line 1 = %s, want a rotate line after %s (seq %d, prev %s)", f.Path, recs[0].raw, files[i-1].Name(), last.Seq+1, hashOf(last.raw))
			}
			if !strings.Contains(rot.Reason, wantReason) {
				t.Errorf("%s rotate reason = %q, want it to contain %q", f.Path, rot.Reason, wantReason)
			}
		}
		for _, r := range recs {
			if r.Kind == audit.KindDecision {
				ids = append(ids, r.DecisionID)
			}
		}
	}
	var want []string
	for i := 1; i <= n; i++ {
		want = append(want, fmt.Sprintf("d_%d", i))
	}
	if !slices.Equal(ids, want) {
		t.Errorf("the set holds records %v, want %v", ids, want)
	}
	rep, err := audit.VerifySet(files, audit.VerifyOptions{})
	if err != nil {
		t.Fatalf("VerifySet: %v", err)
	}
	if rep.Lines != n+len(files)-1 || rep.FirstSeq != 1 || rep.LastSeq != int64(rep.Lines) {
		t.Errorf("VerifySet = %d lines, seq %d-%d; want %d lines from seq 1", rep.Lines, rep.FirstSeq, rep.LastSeq, n+len(files)-1)
	}
	return files
}

func TestRotationBySizeContinuesTheChain(t *testing.T) {
	t.Parallel()
	// One record line is about 250 bytes: a file takes three or four.
	const maxBytes = 1000
	tests := []struct {
		name string
		opts audit.Options
	}{
		{name: "files rotate by size", opts: audit.Options{MaxBytes: maxBytes}},
		{name: "files rotate by size with sync", opts: audit.Options{MaxBytes: maxBytes, Sync: true}},
		{name: "files rotate by size and are compressed", opts: audit.Options{MaxBytes: maxBytes, Compress: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			tc.opts.Now = stepClock()
			writeRecords(t, path, tc.opts, 1, 30)
			// Reopening goes on in the active file and rotates on.
			writeRecords(t, path, tc.opts, 31, 10)
			files := checkRotatedSet(t, path, 40, "the file would pass 1000 bytes")
			if len(files) < 8 {
				t.Errorf("40 records of ~250 bytes in files of %d bytes make %d files, want at least 8", maxBytes, len(files))
			}
			for _, f := range files {
				if f.Compressed != (tc.opts.Compress && f.Seq != 0) {
					t.Errorf("%s compressed = %v, want %v", f.Path, f.Compressed, tc.opts.Compress && f.Seq != 0)
				}
				if f.Compressed {
					continue
				}
				fi, err := os.Stat(f.Path)
				if err != nil {
					t.Fatal(err)
				}
				if fi.Size() > maxBytes {
					t.Errorf("%s has %d bytes, more than MaxBytes %d", f.Path, fi.Size(), maxBytes)
				}
				if fi.Mode().Perm() != 0o600 {
					t.Errorf("%s has mode %v, want 0600", f.Path, fi.Mode().Perm())
				}
			}
		})
	}
}

func TestRotationByAge(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	c := newClock()
	l, err := audit.Open(path, audit.Options{Now: c.now, MaxAge: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= 2; i++ {
		if err := l.Write(decision(i)); err != nil {
			t.Fatal(err)
		}
	}
	c.advance(59 * time.Minute)
	if err := l.Write(decision(3)); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(path + ".000000000001"); err == nil {
		t.Fatalf("the log rotated before its first line was an hour old")
	}
	c.advance(time.Minute)
	if err := l.Write(decision(4)); err != nil {
		t.Fatal(err)
	}
	// The lock stays with the log across the rotation.
	if second, err := audit.Open(path, audit.Options{}); !errors.Is(err, audit.ErrLocked) {
		if second != nil {
			second.Close()
		}
		t.Errorf("a second Open after a rotation = %v, want ErrLocked", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	files := checkRotatedSet(t, path, 4, "the file's first line is 1h0m0s old")
	if got, want := names(files), []string{"audit.jsonl.000000000001", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	// Reopened, the active file's age counts from its first line, the
	// rotate line, not from the Open.
	c.advance(time.Hour)
	writeRecords(t, path, audit.Options{Now: c.now, MaxAge: time.Hour}, 5, 1)
	files = checkRotatedSet(t, path, 5, "old")
	if got, want := names(files), []string{"audit.jsonl.000000000001", "audit.jsonl.000000000004", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("after reopening an hour later, files = %v, want %v", got, want)
	}
}

func TestAFileTakesALineBeforeItRotates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	// Every line is larger than MaxBytes: each file holds its rotate line
	// and one record, and never just a rotate line.
	writeRecords(t, path, audit.Options{Now: stepClock(), MaxBytes: 10}, 1, 3)
	files := checkRotatedSet(t, path, 3, "the file would pass 10 bytes")
	if got, want := names(files), []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Errorf("files = %v, want %v", got, want)
	}
	// An empty log does not rotate at its first line.
	path = filepath.Join(t.TempDir(), "audit.jsonl")
	writeRecords(t, path, audit.Options{MaxBytes: 10}, 1, 1)
	if files, err := audit.Files(path); err != nil || len(files) != 1 {
		t.Errorf("after one line in a new log, Files = %v, %v; want the active file alone", names(files), err)
	}
}

func TestKeepPrunesTheOldestAndRecordsIt(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	// Lines are larger than MaxBytes, so every record after the first
	// rotates: record k is in the file that starts at seq 2k-2.
	writeRecords(t, path, audit.Options{Now: stepClock(), MaxBytes: 10, Keep: 2, Compress: true}, 1, 6)
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(files), []string{"audit.jsonl.000000000006.gz", "audit.jsonl.000000000008.gz", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	lines := readSet(t, files)
	if got, want := lines[path][0].Pruned, []string{"audit.jsonl.000000000004"}; !slices.Equal(got, want) {
		t.Errorf("the active file's rotate line prunes %v, want %v", got, want)
	}
	rep, err := audit.VerifySet(files, audit.VerifyOptions{})
	if err != nil {
		t.Fatalf("VerifySet: %v", err)
	}
	want := &audit.Position{Path: path, Line: 1, Seq: 10}
	if rep.StartsAfter != "audit.jsonl.000000000004" || rep.PrunedAt == nil || *rep.PrunedAt != *want {
		t.Errorf("VerifySet starts after %q, pruned at %+v; want audit.jsonl.000000000004 pruned at %+v", rep.StartsAfter, rep.PrunedAt, want)
	}
	// A file removed by hand is not pruned: the set no longer verifies.
	if err := os.Remove(files[0].Path); err != nil {
		t.Fatal(err)
	}
	files, _ = audit.Files(path)
	if _, err := audit.VerifySet(files, audit.VerifyOptions{}); err == nil || !strings.Contains(err.Error(), "seq 1-7 missing: the set starts after audit.jsonl.000000000006, which is not in it, and no rotate line records it as pruned") {
		t.Errorf("VerifySet after removing the oldest kept file = %v, want seq 1-7 missing", err)
	}
}

// captured is a slog handler that keeps the messages it gets.
type captured struct {
	mu   sync.Mutex
	msgs []string
}

func (c *captured) Enabled(context.Context, slog.Level) bool { return true }
func (c *captured) WithAttrs([]slog.Attr) slog.Handler       { return c }
func (c *captured) WithGroup(string) slog.Handler            { return c }
func (c *captured) Handle(_ context.Context, r slog.Record) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.msgs = append(c.msgs, r.Level.String()+" "+r.Message)
	return nil
}

func (c *captured) messages() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.msgs)
}

func TestWriteGoesOnWhenRotationFails(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// block makes the next rotation fail; it returns how to undo that.
		block func(t *testing.T, path string) (unblock func())
	}{
		{
			name: "the new file cannot be created",
			block: func(t *testing.T, path string) func() {
				if err := os.Mkdir(path+".next", 0o700); err != nil {
					t.Fatal(err)
				}
				return func() { os.Remove(path + ".next") }
			},
		},
		{
			name: "the closed name is taken",
			block: func(t *testing.T, path string) func() {
				if err := os.WriteFile(path+".000000000001", []byte("x"), 0o600); err != nil {
					t.Fatal(err)
				}
				return func() { os.Remove(path + ".000000000001") }
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.jsonl")
			l, logs := openRotating(t, path, audit.Options{})
			unblock := tc.block(t, path)
			for i := 2; i <= 4; i++ {
				if err := l.Write(decision(i)); err != nil {
					t.Fatalf("Write %d while rotation fails: %v", i, err)
				}
			}
			if seq, _ := l.Head(); seq != 4 {
				t.Errorf("after 4 writes with rotation failing, Head seq = %d, want 4 (no rotate lines)", seq)
			}
			if rep, err := audit.VerifyFile(path); err != nil || rep.Lines != 4 {
				t.Errorf("the active file has %d good lines (%v), want all 4", rep.Lines, err)
			}
			if _, err := os.Stat(path + ".next"); tc.name != "the new file cannot be created" && err == nil {
				t.Errorf("a failed rotation left %s.next behind", path)
			}
			unblock()
			if err := l.Write(decision(5)); err != nil {
				t.Fatal(err)
			}
			want := []string{
				"WARN audit log rotation failed; writing on in the old file and retrying at each line",
				"INFO audit log rotation works again",
			}
			if got := logs.messages(); !slices.Equal(got, want) {
				t.Errorf("logged %q, want %q", got, want)
			}
			if err := l.Close(); err != nil {
				t.Fatal(err)
			}
			files := checkRotatedSet(t, path, 5, "the file would pass 10 bytes")
			if got, want := names(files), []string{"audit.jsonl.000000000001", "audit.jsonl"}; !slices.Equal(got, want) {
				t.Errorf("files = %v, want %v", got, want)
			}
		})
	}
}

// openRotating opens the log at path with opts, a step clock, a MaxBytes
// smaller than a line (every record after the first rotates) and a logger
// the test reads, and writes record 1. Close is up to the test, and done
// again (harmlessly) at its end.
func openRotating(t *testing.T, path string, opts audit.Options) (*audit.Log, *captured) {
	t.Helper()
	logs := &captured{}
	opts.Now, opts.MaxBytes, opts.Logger = stepClock(), 10, slog.New(logs)
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	if err := l.Write(decision(1)); err != nil {
		t.Fatal(err)
	}
	return l, logs
}

// leftovers lists the names in dir other than the log's own files and the
// filler's.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range entries {
		name := e.Name()
		if name != "audit.jsonl" && name != "audit.jsonl.lock" && audit.FileAt(name).Seq == 0 && !strings.HasPrefix(name, "filler-") {
			out = append(out, name)
		}
	}
	return out
}

// gzipFile writes a compressed copy of src to dst.
func gzipFile(t *testing.T, src, dst string) {
	t.Helper()
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	zw := gzip.NewWriter(&b)
	zw.Write(data)
	zw.Close()
	if err := os.WriteFile(dst, b.Bytes(), 0o600); err != nil {
		t.Fatal(err)
	}
}

// rotatedSet writes a log of n records rotating at every record after the
// first (lines are larger than MaxBytes), so that its files are
// PATH.000000000001 (seq 1), PATH.000000000002 (seq 2-3), … and PATH.
func rotatedSet(t *testing.T, dir string, n int, opts audit.Options) string {
	t.Helper()
	path := filepath.Join(dir, "audit.jsonl")
	opts.Now, opts.MaxBytes = stepClock(), 10
	writeRecords(t, path, opts, 1, n)
	return path
}

func TestOpenFinishesWhatACrashLeft(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// crash turns a log of 3 records (files .1, .2 and the active one,
		// which starts at seq 4) into what a crash left.
		crash func(t *testing.T, path string)
		opts  audit.Options
		// want is the files after Open and Close; wantReason the reason of
		// a rotate line Open wrote, "" for none.
		want       []string
		wantReason string
	}{
		{
			name: "a crash after the new file was written leaves PATH.next, which is removed",
			crash: func(t *testing.T, path string) {
				if err := os.WriteFile(path+".next", []byte(`{"seq":6}`+"\n"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl"},
		},
		{
			name: "a crash after the link leaves the active file under its closed name too, which is unlinked",
			crash: func(t *testing.T, path string) {
				if err := os.Link(path, path+".000000000004"); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl"},
		},
		{
			name: "a missing active file is started again after the newest closed one",
			crash: func(t *testing.T, path string) {
				if err := os.Rename(path, path+".000000000004"); err != nil {
					t.Fatal(err)
				}
			},
			want:       []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl.000000000004", "audit.jsonl"},
			wantReason: "the active file was missing at start",
		},
		{
			name: "an empty active file is started again after the newest closed one",
			crash: func(t *testing.T, path string) {
				if err := os.Rename(path, path+".000000000004"); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(path, nil, 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want:       []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl.000000000004", "audit.jsonl"},
			wantReason: "the active file was empty at start",
		},
		{
			name: "a missing active file after compressed closed ones",
			crash: func(t *testing.T, path string) {
				gzipFile(t, path, path+".000000000004.gz")
				for _, p := range []string{path + ".000000000001", path + ".000000000002"} {
					gzipFile(t, p, p+".gz")
				}
				for _, p := range []string{path, path + ".000000000001", path + ".000000000002"} {
					if err := os.Remove(p); err != nil {
						t.Fatal(err)
					}
				}
			},
			opts:       audit.Options{Compress: true},
			want:       []string{"audit.jsonl.000000000001.gz", "audit.jsonl.000000000002.gz", "audit.jsonl.000000000004.gz", "audit.jsonl"},
			wantReason: "the active file was missing at start",
		},
		{
			name: "a compression cut short leaves NAME.gz.tmp, which is removed",
			crash: func(t *testing.T, path string) {
				if err := os.WriteFile(path+".000000000002.gz.tmp", []byte("partial"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl"},
		},
		{
			name: "a compression cut short before removing NAME leaves NAME.gz, which is removed",
			crash: func(t *testing.T, path string) {
				if err := os.WriteFile(path+".000000000002.gz", []byte("not even gzip"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			want: []string{"audit.jsonl.000000000001", "audit.jsonl.000000000002", "audit.jsonl"},
		},
		{
			name: "with compression on, closed files left uncompressed are compressed",
			crash: func(t *testing.T, path string) {
				if err := os.WriteFile(path+".000000000002.gz", []byte("not even gzip"), 0o600); err != nil {
					t.Fatal(err)
				}
			},
			opts: audit.Options{Compress: true},
			want: []string{"audit.jsonl.000000000001.gz", "audit.jsonl.000000000002.gz", "audit.jsonl"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := rotatedSet(t, t.TempDir(), 3, audit.Options{})
			tc.crash(t, path)
			tc.opts.Now = stepClock()
			writeRecords(t, path, tc.opts, 4, 0)
			files, err := audit.Files(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := names(files); !slices.Equal(got, tc.want) {
				t.Errorf("files = %v, want %v", got, tc.want)
			}
			rep, err := audit.VerifySet(files, audit.VerifyOptions{})
			if err != nil {
				t.Fatalf("VerifySet after Open: %v", err)
			}
			wantLines := 5 // 3 records, 2 rotate lines
			if tc.wantReason != "" {
				wantLines++
			}
			if rep.Lines != wantLines {
				t.Errorf("VerifySet found %d lines, want %d", rep.Lines, wantLines)
			}
			active := readSet(t, files[len(files)-1:])[path]
			if tc.wantReason != "" && (active[0].Kind != audit.KindRotate || active[0].Reason != tc.wantReason || active[0].PrevFile != "audit.jsonl.000000000004") {
				t.Errorf("the active file starts with %s, want a rotate line after audit.jsonl.000000000004 saying %q", active[0].raw, tc.wantReason)
			}
			if entries, _ := os.ReadDir(filepath.Dir(path)); len(entries) != len(tc.want)+1 {
				var all []string
				for _, e := range entries {
					all = append(all, e.Name())
				}
				t.Errorf("the directory holds %v, want the files and the lock file only", all)
			}
		})
	}
}

func TestOpenRefusesAnInconsistentSet(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		crash   func(t *testing.T, path string)
		wantErr string
	}{
		{
			name: "a closed file that starts with the active file but is another file",
			crash: func(t *testing.T, path string) {
				data, _ := os.ReadFile(path)
				os.WriteFile(path+".000000000004", data, 0o600)
			},
			wantErr: "audit.jsonl.000000000004 starts at seq 4 like the active file; move one of them away",
		},
		{
			name: "a closed file newer than the active file",
			crash: func(t *testing.T, path string) {
				os.WriteFile(path+".000000000009", []byte("x\n"), 0o600)
			},
			wantErr: "audit.jsonl.000000000009 starts at seq 9, after the active file's first line (seq 4); move one of them away",
		},
		{
			name: "a missing active file after a closed file with a torn last line",
			crash: func(t *testing.T, path string) {
				os.Remove(path)
				f, _ := os.OpenFile(path+".000000000002", os.O_WRONLY|os.O_APPEND, 0)
				f.WriteString(`{"seq":4,"ti`)
				f.Close()
			},
			wantErr: "audit.jsonl.000000000002: line 3: line is not a JSON record",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := rotatedSet(t, t.TempDir(), 3, audit.Options{})
			tc.crash(t, path)
			l, err := audit.Open(path, audit.Options{})
			if err == nil {
				l.Close()
				t.Fatalf("Open succeeded, want an error")
			}
			if !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("Open error = %v, want it to contain %q", err, tc.wantErr)
			}
		})
	}
}

func TestLinesReadsTheSetInOrder(t *testing.T) {
	t.Parallel()
	path := rotatedSet(t, t.TempDir(), 4, audit.Options{Compress: true})
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := names(files), []string{"audit.jsonl.000000000001.gz", "audit.jsonl.000000000002.gz", "audit.jsonl.000000000004.gz", "audit.jsonl"}; !slices.Equal(got, want) {
		t.Fatalf("files = %v, want %v", got, want)
	}
	var got []string
	for line, err := range audit.Lines(files) {
		if err != nil {
			t.Fatal(err)
		}
		var r audit.Record
		json.Unmarshal(line.Text, &r)
		got = append(got, fmt.Sprintf("%s:%d:%d", filepath.Base(line.File.Path), line.Number, r.Seq))
	}
	want := []string{
		"audit.jsonl.000000000001.gz:1:1",
		"audit.jsonl.000000000002.gz:1:2", "audit.jsonl.000000000002.gz:2:3",
		"audit.jsonl.000000000004.gz:1:4", "audit.jsonl.000000000004.gz:2:5",
		"audit.jsonl:1:6", "audit.jsonl:2:7",
	}
	if !slices.Equal(got, want) {
		t.Errorf("Lines = %v, want %v", got, want)
	}

	// A file listed before it was compressed is read from its .gz.
	plain := filepath.Join(t.TempDir(), "audit.jsonl")
	rotatedSet(t, filepath.Dir(plain), 2, audit.Options{})
	files, _ = audit.Files(plain)
	gzipFile(t, files[0].Path, files[0].Path+".gz")
	os.Remove(files[0].Path)
	n := 0
	for _, err := range audit.Lines(files) {
		if err != nil {
			t.Fatalf("Lines after a listed file was compressed: %v", err)
		}
		n++
	}
	if n != 3 {
		t.Errorf("Lines read %d lines, want 3", n)
	}

	// Breaking off stops the iteration; a missing file is an error.
	n = 0
	for range audit.Lines(files) {
		n++
		break
	}
	if n != 1 {
		t.Errorf("the loop ran %d times after a break, want 1", n)
	}
	missing := []audit.File{{Path: filepath.Join(t.TempDir(), "gone.jsonl")}}
	for line, err := range audit.Lines(missing) {
		if !errors.Is(err, os.ErrNotExist) || line.File != missing[0] || line.Number != 0 {
			t.Errorf("Lines of a missing file = %+v, %v; want the file, line 0 and ErrNotExist", line, err)
		}
	}
	corrupt := filepath.Join(t.TempDir(), "audit.jsonl.000000000001.gz")
	os.WriteFile(corrupt, []byte("\x1f\x8b\x08\x00garbage"), 0o600)
	for _, err := range audit.Lines([]audit.File{audit.FileAt(corrupt)}) {
		if err == nil || !strings.Contains(err.Error(), "compressed data is corrupt") {
			t.Errorf("Lines of a corrupt .gz = %v, want a corrupt-data error", err)
		}
	}
}

// BenchmarkWriteRotating rotates at every line: the cost of a rotation
// (an fsync of each file and of the directory) against BenchmarkWrite.
func BenchmarkWriteRotating(b *testing.B) {
	l, err := audit.Open(filepath.Join(b.TempDir(), "audit.jsonl"), audit.Options{MaxBytes: 10})
	if err != nil {
		b.Fatal(err)
	}
	defer l.Close()
	rec := decision(1)
	for b.Loop() {
		if err := l.Write(rec); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkVerifySet verifies a set of 16 files of 4 MiB, plain and
// compressed.
func BenchmarkVerifySet(b *testing.B) {
	for _, compress := range []bool{false, true} {
		b.Run(fmt.Sprintf("compressed=%v", compress), func(b *testing.B) {
			path := filepath.Join(b.TempDir(), "audit.jsonl")
			l, err := audit.Open(path, audit.Options{MaxBytes: 4 << 20, Compress: compress})
			if err != nil {
				b.Fatal(err)
			}
			var size int64
			for i := 0; size < 64<<20; i++ {
				if err := l.Write(decision(i)); err != nil {
					b.Fatal(err)
				}
				size += 250
			}
			l.Close()
			files, err := audit.Files(path)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(size)
			for b.Loop() {
				if _, err := audit.VerifySet(files, audit.VerifyOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
