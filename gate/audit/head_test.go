package audit_test

import (
	"bytes"
	"errors"
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

// headSink is an Options.Head the test can read while the Log writes.
type headSink struct {
	mu sync.Mutex
	b  bytes.Buffer
	n  int // Write calls
}

func (s *headSink) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.n++
	return s.b.Write(p)
}

func (s *headSink) heads(t *testing.T) []audit.HeadAt {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	heads, err := audit.ReadHeads(bytes.NewReader(s.b.Bytes()), "sink")
	if err != nil {
		t.Fatalf("ReadHeads: %v", err)
	}
	if len(heads) != s.n {
		t.Fatalf("%d checkpoints in %d writes, want one per write", len(heads), s.n)
	}
	return heads
}

func TestCheckpointsFollowTheHead(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	sink := &headSink{}
	opts := audit.Options{Now: stepClock(), MaxBytes: 10, Head: sink, HeadInterval: time.Millisecond}
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	if h := sink.heads(t); len(h) != 1 || h[0].Seq != 0 || h[0].Hash != zeroHash || h[0].Log != path || h[0].File != "audit.jsonl" {
		t.Errorf("checkpoints after Open = %+v, want one of the empty log", h)
	}
	for i := 1; i <= 3; i++ {
		if err := l.Write(decision(i)); err != nil {
			t.Fatal(err)
		}
	}
	seq, hash := l.Head()
	// The interval's checkpoint arrives without a Close.
	deadline := time.Now().Add(10 * time.Second)
	for {
		h := sink.heads(t)
		if last := h[len(h)-1]; last.Seq == seq && last.Hash == hash {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint of seq %d within 10s: %+v", seq, h)
		}
		time.Sleep(time.Millisecond)
	}
	// Nothing new is written while the head stands still.
	n := len(sink.heads(t))
	time.Sleep(20 * time.Millisecond)
	if m := len(sink.heads(t)); m != n {
		t.Errorf("%d checkpoints written while the head stood still", m-n)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	heads := sink.heads(t)
	if last := heads[len(heads)-1]; last.Seq != seq || last.Hash != hash || len(heads) != n+1 {
		t.Errorf("the checkpoint of Close = %+v, want seq %d hash %s written after the %d before", last, seq, hash, n)
	}
	for i := 1; i < len(heads); i++ {
		if heads[i].Seq < heads[i-1].Seq {
			t.Errorf("checkpoint %d has seq %d after %d", i+1, heads[i].Seq, heads[i-1].Seq)
		}
	}
	files, _ := audit.Files(path)
	rep, err := audit.VerifySet(files, audit.VerifyOptions{Heads: heads})
	if err != nil {
		t.Fatalf("VerifySet with the checkpoints: %v", err)
	}
	if rep.Heads.Checked != len(heads)-1 || rep.Heads.Unchecked != 1 || rep.Heads.Newest.Seq != seq || rep.Heads.NewestAt != (audit.Position{Path: path, Line: 2, Seq: seq}) {
		t.Errorf("head report = %+v (newest at %+v), want %d checked, the empty log's unchecked, the newest at %s line 2", rep.Heads, rep.Heads.NewestAt, len(heads)-1, path)
	}
}

func TestCheckpointsAreWrittenAtRotationWithoutAnInterval(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	sink := &headSink{}
	l, err := audit.Open(path, audit.Options{Now: stepClock(), MaxBytes: 10, Head: sink})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 1; i <= 2; i++ {
		if err := l.Write(decision(i)); err != nil {
			t.Fatal(err)
		}
	}
	// The second record rotated: its rotate line is seq 2.
	deadline := time.Now().Add(10 * time.Second)
	for !slices.ContainsFunc(sink.heads(t), func(h audit.HeadAt) bool { return h.Seq >= 2 }) {
		if time.Now().After(deadline) {
			t.Fatalf("no checkpoint after the rotation within 10s: %+v", sink.heads(t))
		}
		time.Sleep(time.Millisecond)
	}
}

// failingWriter fails every write.
type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("head destination gone") }

func TestAFailingHeadDoesNotFailWrites(t *testing.T) {
	t.Parallel()
	logs := &captured{}
	l, err := audit.Open(filepath.Join(t.TempDir(), "audit.jsonl"), audit.Options{Head: failingWriter{}, Logger: slog.New(logs)})
	if err != nil {
		t.Fatal(err)
	}
	if err := l.Write(decision(1)); err != nil {
		t.Errorf("Write with a failing head = %v, want nil", err)
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if got := logs.messages(); !slices.Equal(got, []string{"WARN audit log: writing a head checkpoint failed"}) {
		t.Errorf("logged %q, want one warning", got)
	}
}

func TestReadHeads(t *testing.T) {
	t.Parallel()
	h := audit.Head{Log: "/var/log/gk/audit.jsonl", File: "audit.jsonl", Seq: 42, Hash: strings.Repeat("ab", 32), Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)}
	line := string(audit.AppendHead(nil, h))
	if want := `{"kind":"audit_head","log":"/var/log/gk/audit.jsonl","file":"audit.jsonl","seq":42,"hash":"` + strings.Repeat("ab", 32) + `","time":"2026-05-01T12:00:00Z"}` + "\n"; line != want {
		t.Errorf("AppendHead = %s, want %s", line, want)
	}
	tests := []struct {
		name      string
		input     string
		wantLines []int
		wantErr   string
	}{
		{name: "bare checkpoint lines", input: line + line, wantLines: []int{1, 2}},
		{name: "checkpoints behind a syslog prefix among other lines", input: "May  1 12:00:00 host gatekeeper[7]: " + line + "other line\n" + "x " + line, wantLines: []int{1, 3}},
		{name: "a last line without its newline", input: line + strings.TrimSuffix(line, "\n"), wantLines: []int{1, 2}},
		{name: "no checkpoints", input: "nothing here\n"},
		{name: "a cut checkpoint names its line", input: line + line[:40] + "\n", wantErr: "src line 2: not a checkpoint"},
		{name: "a checkpoint with a short hash", input: strings.Replace(line, strings.Repeat("ab", 32), "abab", 1), wantErr: "src line 1: not a checkpoint: seq or hash out of form"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			heads, err := audit.ReadHeads(strings.NewReader(tc.input), "src")
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Errorf("ReadHeads error = %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var lines []int
			for _, got := range heads {
				lines = append(lines, got.Line)
				if got.Head != h || got.Source != "src" {
					t.Errorf("ReadHeads = %+v, want %+v from src", got, h)
				}
			}
			if !slices.Equal(lines, tc.wantLines) {
				t.Errorf("checkpoints at lines %v, want %v", lines, tc.wantLines)
			}
		})
	}
}

func TestVerifySetAgainstCheckpoints(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// change changes the set (PATH.000000000001, PATH.000000000002,
		// PATH.000000000004 and PATH with seq 6-7) after the checkpoints
		// were taken: seq 0 at 12:00:00, seq 7 at 12:00:01 and 12:00:02.
		change        func(t *testing.T, path string)
		keep          int
		want          []string
		wantChecked   int
		wantUnchecked int
	}{
		{
			name:          "an intact log matches every checkpoint",
			wantChecked:   2,
			wantUnchecked: 1,
		},
		{
			name: "a log cut by its last line",
			change: func(t *testing.T, path string) {
				lines := readLines(t, path)
				os.WriteFile(path, join(lines[:1]...), 0o600)
			},
			want:          []string{"head line 3: the log ends at seq 6 ($DIR/audit.jsonl line 1), but this checkpoint of 2026-05-01T12:00:02Z has seq 7: seq 7 missing, cut off the end"},
			wantUnchecked: 1,
		},
		{
			name: "a log whose active file is gone",
			change: func(t *testing.T, path string) {
				os.Remove(path)
			},
			want:          []string{"head line 3: the log ends at seq 5 ($DIR/audit.jsonl.000000000004 line 2), but this checkpoint of 2026-05-01T12:00:02Z has seq 7: seq 6-7 missing, cut off the end"},
			wantUnchecked: 1,
		},
		{
			name: "a log whose last line was rewritten",
			change: func(t *testing.T, path string) {
				replaceIn(t, path, `"d_4"`, `"d_X"`)
			},
			want: []string{
				"head line 2: $DIR/audit.jsonl line 2 has seq 7 but not the hash this checkpoint of 2026-05-01T12:00:01Z recorded: the log was rewritten from there on",
				"head line 3: $DIR/audit.jsonl line 2 has seq 7 but not the hash this checkpoint of 2026-05-01T12:00:02Z recorded: the log was rewritten from there on",
			},
			wantUnchecked: 1,
		},
		{
			name:          "checkpoints older than a pruned set are not checked",
			keep:          1,
			wantChecked:   2,
			wantUnchecked: 2,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			path := rotatedSet(t, dir, 4, audit.Options{Keep: tc.keep})
			lines := readLines(t, path)
			at := func(line int, seq int64, hash string, sec int) audit.HeadAt {
				return audit.HeadAt{Source: "heads", Line: line, Head: audit.Head{
					Log: path, File: "audit.jsonl", Seq: seq, Hash: hash, Time: time.Date(2026, 5, 1, 12, 0, sec, 0, time.UTC),
				}}
			}
			heads := []audit.HeadAt{at(1, 0, zeroHash, 0), at(2, 7, hashOf(lines[1]), 1), at(3, 7, hashOf(lines[1]), 2)}
			if tc.keep > 0 {
				heads = append(heads, at(4, 2, zeroHash, 3)) // in a pruned file
			}
			if tc.change != nil {
				tc.change(t, path)
			}
			files, err := audit.Files(path)
			if err != nil {
				t.Fatal(err)
			}
			rep, err := audit.VerifySet(files, audit.VerifyOptions{Heads: heads})
			got := problems(rep)
			for i := range got {
				got[i] = strings.ReplaceAll(got[i], dir, "$DIR")
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("problems:\n  %q\nwant:\n  %q", got, tc.want)
			}
			if (err != nil) != (len(tc.want) > 0) || err != nil && !errors.Is(err, audit.ErrCutOff) {
				t.Errorf("VerifySet error = %v, want one wrapping ErrCutOff exactly when there are problems", err)
			}
			if rep.Heads.Checked != tc.wantChecked || rep.Heads.Unchecked != tc.wantUnchecked {
				t.Errorf("heads checked %d, unchecked %d; want %d, %d", rep.Heads.Checked, rep.Heads.Unchecked, tc.wantChecked, tc.wantUnchecked)
			}
			if tc.wantChecked > 0 && (rep.Heads.Newest == nil || rep.Heads.Newest.Line != 3) {
				t.Errorf("newest checkpoint = %+v, want the one of line 3", rep.Heads.Newest)
			}
		})
	}
}
