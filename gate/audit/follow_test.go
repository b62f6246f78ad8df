package audit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// everything asks a Follower for all the lines already there.
var everything = audit.FollowOptions{Backlog: 1 << 30}

// nextAll calls Next until it returns nothing and collects the lines.
func nextAll(t *testing.T, fl *audit.Follower) []audit.Line {
	t.Helper()
	var out []audit.Line
	for {
		ls, err := fl.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		if len(ls) == 0 {
			return out
		}
		out = append(out, ls...)
	}
}

// texts returns the lines' texts.
func texts(lines []audit.Line) []string {
	out := make([]string, len(lines))
	for i, l := range lines {
		out[i] = string(l.Text)
	}
	return out
}

// setTexts reads the rotated log at path, oldest line first.
func setTexts(t *testing.T, path string) []string {
	t.Helper()
	files, err := audit.Files(path)
	if err != nil {
		t.Fatalf("Files: %v", err)
	}
	var out []string
	for l, err := range audit.Lines(files) {
		if err != nil {
			t.Fatalf("Lines: %v", err)
		}
		out = append(out, string(l.Text))
	}
	return out
}

// smallFiles rotates after every line or two.
func smallFiles() audit.Options { return audit.Options{MaxBytes: 400, Now: newClock().now} }

// checkOnceInOrder fails unless got is exactly want, naming the first
// line lost or repeated.
func checkOnceInOrder(t *testing.T, got, want []string) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("line %d of %d: got\n%s\nwant\n%s", i+1, len(want), got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("got %d lines, want %d", len(got), len(want))
	}
}

func appendFile(t *testing.T, path, s string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString(s); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFollowerReadsWhatIsAppended(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	fl := audit.NewFollower(path, everything)
	defer fl.Close()

	if got := nextAll(t, fl); len(got) != 0 {
		t.Fatalf("a missing file gave lines %q", texts(got))
	}
	appendFile(t, path, "one\ntw")
	got := nextAll(t, fl)
	if !reflect.DeepEqual(texts(got), []string{"one"}) || got[0].Number != 1 || got[0].File.Path != path {
		t.Fatalf("first read: %+v, want line 1 of %s, one", got, path)
	}
	appendFile(t, path, "o\nthree\n")
	if got := nextAll(t, fl); !reflect.DeepEqual(texts(got), []string{"two", "three"}) || got[1].Number != 3 {
		t.Fatalf("after the rest of a torn line: %+v, want two and three, lines 2 and 3", got)
	}
}

func TestFollowerStartsOverWhenTheFileShrinks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	appendFile(t, path, "old line one\nold line two\n")
	fl := audit.NewFollower(path, everything)
	defer fl.Close()
	nextAll(t, fl)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "new\n")
	if got := nextAll(t, fl); !reflect.DeepEqual(texts(got), []string{"new"}) || got[0].Number != 1 {
		t.Fatalf("after a truncation: %+v, want new as line 1", got)
	}
}

func TestFollowerReadsEveryLineOfTheRotationsBetweenTwoReads(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	opts := smallFiles()
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fl := audit.NewFollower(path, everything)
	defer fl.Close()
	if err := l.Write(decision(0)); err != nil {
		t.Fatal(err)
	}
	got := nextAll(t, fl)
	// Several rotations before the next read: the files in between are
	// no longer at the path, only under their closed names.
	for i := 1; i <= 6; i++ {
		if err := l.Write(decision(i)); err != nil {
			t.Fatal(err)
		}
	}
	if files, _ := audit.Files(path); len(files) < 5 {
		t.Fatalf("only %d files: the test wants several rotations between the reads", len(files))
	}
	got = append(got, nextAll(t, fl)...)
	checkOnceInOrder(t, texts(got), setTexts(t, path))
	for _, line := range got {
		var rec audit.Record
		if err := json.Unmarshal(line.Text, &rec); err != nil {
			t.Fatal(err)
		}
		if f := audit.FileAt(line.File.Path); f.Seq > 0 && (rec.Seq < f.Seq || line.Number != int(rec.Seq-f.Seq)+1) {
			t.Errorf("seq %d is named %s line %d, which holds another line", rec.Seq, filepath.Base(line.File.Path), line.Number)
		}
	}
}

func TestFollowerLosesAndRepeatsNoLineWhileTheWriterRotates(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	opts := smallFiles()
	opts.Compress = true // closed files also change their names under the reader
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	fl := audit.NewFollower(path, everything)
	defer fl.Close()
	const n = 150
	done := make(chan error, 1)
	go func() {
		for i := range n {
			if err := l.Write(decision(i)); err != nil {
				done <- err
				return
			}
		}
		done <- l.Close()
	}()
	var got []audit.Line
	for finished := false; ; {
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			finished = true
		default:
		}
		lines, err := fl.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		got = append(got, lines...)
		if finished && len(lines) == 0 {
			break
		}
		if len(lines) == 0 {
			time.Sleep(50 * time.Microsecond) // leave the writer the CPU
		}
	}
	want := setTexts(t, path)
	if len(want) <= n {
		t.Fatalf("the set has %d lines for %d records: no rotation happened", len(want), n)
	}
	checkOnceInOrder(t, texts(got), want)
}

func TestFollowerBacklog(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	writeRecords(t, path, audit.Options{MaxBytes: 700, Now: newClock().now}, 0, 30)
	all := setTexts(t, path)
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	active := readLines(t, path)
	if len(files) < 8 || len(active) < 2 {
		t.Fatalf("%d files, %d lines in the active one: the test wants more", len(files), len(active))
	}
	// The oldest file is junk: a backlog that does not reach it must not
	// open it.
	if err := os.WriteFile(files[0].Path, []byte("junk\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	size := func(lines []string) int64 {
		n := 0
		for _, l := range lines {
			n += len(l) + 1
		}
		return int64(n)
	}
	longest := 0
	for _, l := range all {
		longest = max(longest, len(l)+1)
	}
	cases := []struct {
		name string
		opts audit.FollowOptions
		// want is how many of the newest lines come back, or 0 to check
		// the bound on bytes only.
		want     int
		maxBytes int64
	}{
		{"none", audit.FollowOptions{}, 0, 0},
		{"fewer than the active file holds", audit.FollowOptions{Backlog: 1}, 1, 0},
		{"the active file and part of the closed ones", audit.FollowOptions{Backlog: 9}, 9, 0},
		{"up to the junk", audit.FollowOptions{Backlog: len(all) - 3}, len(all) - 3, 0},
		{"by bytes, in the active file", audit.FollowOptions{Backlog: 1000, BacklogBytes: size(all[len(all)-1:])}, 1, 0},
		{"at least one line however few bytes", audit.FollowOptions{Backlog: 1000, BacklogBytes: 1}, 1, 0},
		{"by bytes, across files", audit.FollowOptions{Backlog: 1000, BacklogBytes: 2000}, 0, 2000},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			fl := audit.NewFollower(path, tc.opts)
			defer fl.Close()
			got := texts(nextAll(t, fl))
			if tc.maxBytes > 0 {
				if size(got) > tc.maxBytes+int64(longest) || size(got) < tc.maxBytes-2*int64(longest) || len(got) == 0 {
					t.Fatalf("%d lines, %d bytes; want the newest lines of about %d bytes", len(got), size(got), tc.maxBytes)
				}
				tc.want = len(got)
			}
			checkOnceInOrder(t, got, all[len(all)-tc.want:])
		})
	}
}

func TestFollowerGoesOnAfterTheBacklog(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeRecords(t, path, smallFiles(), 0, 10)
	before := len(setTexts(t, path))
	fl := audit.NewFollower(path, audit.FollowOptions{Backlog: 2})
	defer fl.Close()
	got := nextAll(t, fl)
	writeRecords(t, path, smallFiles(), 10, 5)
	got = append(got, nextAll(t, fl)...)
	checkOnceInOrder(t, texts(got), setTexts(t, path)[before-2:])
}

func TestChainAgreesWithVerify(t *testing.T) {
	t.Parallel()
	lines := readLines(t, writeLog(t, t.TempDir(), 5))
	edited := bytes.Clone(lines[2])
	edited[bytes.Index(edited, []byte("ls -la"))] = 'L'
	cases := []struct {
		name  string
		lines [][]byte
	}{
		{"an intact log", lines},
		{"a log with an edited third line", [][]byte{lines[0], lines[1], edited, lines[3], lines[4]}},
		{"a log missing its second line", [][]byte{lines[0], lines[2], lines[3]}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			wantRep, wantErr := audit.Verify(bytes.NewReader(join(tc.lines...)))
			var c audit.Chain
			for _, l := range tc.lines {
				_ = c.Next(l, true)
			}
			rep, err := c.Report()
			if rep != wantRep {
				t.Errorf("Chain report %+v, Verify %+v", rep, wantRep)
			}
			var be, wantBe *audit.BreakError
			if errors.As(wantErr, &wantBe) != errors.As(err, &be) || (be != nil && *be != *wantBe) {
				t.Errorf("Chain error %v, Verify %v", err, wantErr)
			}
		})
	}
}

func TestAPartialChainStartsInsideALogAndChecksTheRest(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeRecords(t, path, smallFiles(), 0, 8)
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	var lines []audit.Line
	for l, err := range audit.Lines(files) {
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, l)
	}
	edit := func(l audit.Line, from, to string) audit.Line {
		l.Text = []byte(strings.Replace(string(l.Text), from, to, 1))
		return l
	}
	n := len(lines)
	cases := []struct {
		name    string
		partial bool
		lines   []audit.Line
		// wantLines verify; wantBreak is the line that breaks, if any.
		wantLines int
		wantBreak *audit.Line
		reason    string
	}{
		{"the whole log", false, lines, n, nil, ""},
		{"the whole log, partial", true, lines, n, nil, ""},
		{"from a rotate line", true, lines[3:], n - 3, nil, ""},
		{"from a line in the middle of a file", true, lines[4:], n - 4, nil, ""},
		{"from the middle, not partial", false, lines[4:], 0, &lines[4], "seq 1 missing"},
		{"an edit after the start", true, append(append([]audit.Line{}, lines[4:6]...), edit(lines[6], "d_", "D_"), lines[7]), 3, &lines[7], "prev hash does not match"},
		{"a start that is no record", true, append([]audit.Line{edit(lines[4], `"time":"`, `"time":"x`)}, lines[5:]...), 0, &lines[4], "time is not RFC 3339"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := audit.Chain{Partial: tc.partial}
			for _, l := range tc.lines {
				_ = c.NextLine(l)
			}
			rep, err := c.Report()
			var be *audit.BreakError
			errors.As(err, &be)
			switch {
			case rep.Lines != tc.wantLines:
				t.Fatalf("%d lines verified (%v), want %d", rep.Lines, err, tc.wantLines)
			case tc.wantBreak == nil && err != nil:
				t.Fatalf("break %v, want none", err)
			case tc.wantBreak != nil && (be == nil || be.File != tc.wantBreak.File.Path || be.Line != tc.wantBreak.Number || !strings.Contains(be.Reason, tc.reason)):
				t.Fatalf("break %v, want %s line %d: %s", err, tc.wantBreak.File.Path, tc.wantBreak.Number, tc.reason)
			}
			if rep.Lines > 0 {
				var first audit.Record
				if err := json.Unmarshal(tc.lines[0].Text, &first); err != nil {
					t.Fatal(err)
				}
				if c.FirstSeq() != first.Seq {
					t.Errorf("FirstSeq %d, want %d", c.FirstSeq(), first.Seq)
				}
			}
		})
	}
}

func TestTheFirstLineOfARotatedFileNamesTheFileBeforeWhenItBreaks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	writeRecords(t, path, smallFiles(), 0, 4)
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	var c audit.Chain
	var be *audit.BreakError
	for l, err := range audit.Lines(files) {
		if err != nil {
			t.Fatal(err)
		}
		if l.Number == 1 && l.File.Seq == 0 { // the active file's rotate line: change its prev
			i := bytes.Index(l.Text, []byte(`"prev":"`)) + len(`"prev":"`)
			if l.Text[i] == 'f' {
				l.Text[i] = 'e'
			} else {
				l.Text[i] = 'f'
			}
		}
		if err := c.NextLine(l); err != nil && be == nil {
			errors.As(err, &be)
		}
	}
	if be == nil || be.File != path || be.Line != 1 || be.Reason != "prev hash does not match the last line of the file before" {
		t.Fatalf("break %v, want %s line 1: prev hash does not match the last line of the file before", be, path)
	}
}

func TestMaskIsWhatWriteWrites(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatal(err)
	}
	input := map[string]any{"code": "print(1)", "files": map[string]any{"api_token.txt": "abc", "data.csv": "1,2"}, "nested": []any{map[string]any{"Password": "x"}}}
	if err := l.Write(audit.Record{Kind: audit.KindDecision, ToolInput: input}); err != nil {
		t.Fatal(err)
	}
	l.Close()
	var rec struct {
		ToolInput any `json:"tool_input"`
	}
	if err := json.Unmarshal(readLines(t, path)[0], &rec); err != nil {
		t.Fatal(err)
	}
	masked, err := audit.Mask(input)
	if err != nil {
		t.Fatal(err)
	}
	got, _ := json.Marshal(masked)
	want, _ := json.Marshal(rec.ToolInput)
	if !bytes.Equal(got, want) {
		t.Fatalf("Mask gave %s, the log holds %s", got, want)
	}
	if !bytes.Contains(got, []byte(`"api_token.txt":"***"`)) {
		t.Fatalf("Mask left a secret-named value in %s", got)
	}
}
