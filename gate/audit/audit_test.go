package audit_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// stepClock returns a clock that advances one millisecond per call. A Log
// calls it under its lock only.
func stepClock() func() time.Time {
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	return func() time.Time {
		now = now.Add(time.Millisecond)
		return now
	}
}

// writeLog writes n decision records to a new log in dir and returns its
// path.
func writeLog(t *testing.T, dir string, n int) string {
	t.Helper()
	path := filepath.Join(dir, "audit.log")
	l, err := audit.Open(path, audit.Options{Now: stepClock()})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	for i := range n {
		rec := audit.Record{
			Kind:       audit.KindDecision,
			DecisionID: fmt.Sprintf("d_%d", i+1),
			Tool:       "Bash",
			Decision:   "allow",
			Rule:       "bash.readonly",
			Reason:     "read-only command",
			ToolInput:  map[string]any{"command": "ls -la"},
		}
		if err := l.Write(rec); err != nil {
			t.Fatalf("Write %d: %v", i+1, err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	return path
}

// readLines returns the lines of the file at path without their newlines.
func readLines(t *testing.T, path string) [][]byte {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read log: %v", err)
	}
	lines := bytes.SplitAfter(data, []byte{'\n'})
	if len(lines[len(lines)-1]) == 0 {
		lines = lines[:len(lines)-1]
	}
	for i := range lines {
		lines[i] = bytes.TrimSuffix(lines[i], []byte{'\n'})
	}
	return lines
}

// join makes file content of lines, each followed by a newline.
func join(lines ...[]byte) []byte {
	var b bytes.Buffer
	for _, l := range lines {
		b.Write(l)
		b.WriteByte('\n')
	}
	return b.Bytes()
}

func hashOf(line []byte) string {
	sum := sha256.Sum256(line)
	return hex.EncodeToString(sum[:])
}

func TestWrittenChainVerifies(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		n    int
	}{
		{name: "a log with no lines verifies with zero lines", n: 0},
		{name: "a log with one line verifies", n: 1},
		{name: "a log with many lines verifies", n: 250},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := writeLog(t, t.TempDir(), tc.n)
			rep, err := audit.VerifyFile(path)
			if err != nil {
				t.Fatalf("VerifyFile: %v", err)
			}
			wantHash := zeroHash
			if lines := readLines(t, path); len(lines) > 0 {
				wantHash = hashOf(lines[len(lines)-1])
			}
			want := audit.Report{Lines: tc.n, LastSeq: int64(tc.n), LastHash: wantHash}
			if rep != want {
				t.Errorf("VerifyFile = %+v, want %+v", rep, want)
			}
		})
	}
}

func TestLongLinesVerifyAndContinue(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	big := strings.Repeat("x", 300<<10)
	for round := range 2 {
		l, err := audit.Open(path, audit.Options{})
		if err != nil {
			t.Fatalf("Open %d: %v", round+1, err)
		}
		for _, input := range []any{map[string]any{"content": big}, "small", map[string]any{"content": big}} {
			if err := l.Write(audit.Record{Kind: audit.KindDecision, Tool: "Write", ToolInput: input}); err != nil {
				t.Fatalf("Write: %v", err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	rep, err := audit.VerifyFile(path)
	if err != nil {
		t.Fatalf("VerifyFile: %v", err)
	}
	if rep.Lines != 6 {
		t.Errorf("VerifyFile found %d lines, want 6", rep.Lines)
	}
}

// failingReader returns data, then err.
type failingReader struct {
	data []byte
	err  error
}

func (r *failingReader) Read(p []byte) (int, error) {
	if len(r.data) == 0 {
		return 0, r.err
	}
	n := copy(p, r.data)
	r.data = r.data[n:]
	return n, nil
}

func TestVerifyReturnsReadErrors(t *testing.T) {
	t.Parallel()
	lines := readLines(t, writeLog(t, t.TempDir(), 2))
	errRead := errors.New("read failed")
	rep, err := audit.Verify(&failingReader{data: join(lines...), err: errRead})
	if !errors.Is(err, errRead) {
		t.Errorf("Verify error = %v, want one wrapping %v", err, errRead)
	}
	var be *audit.BreakError
	if errors.As(err, &be) {
		t.Errorf("Verify error = %v, want a read error, not a break", err)
	}
	if rep.Lines != 2 {
		t.Errorf("Verify report has %d good lines, want 2", rep.Lines)
	}
	if _, err := audit.VerifyFile(filepath.Join(t.TempDir(), "missing.log")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("VerifyFile of a missing file = %v, want ErrNotExist", err)
	}
}

func TestWriteSetsChainFields(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(path, audit.Options{Now: func() time.Time {
		return time.Date(2026, 3, 4, 5, 6, 7, 890, time.FixedZone("CET", 3600))
	}})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	code := 0
	recs := []audit.Record{
		{Seq: 42, Time: time.Unix(0, 0), Prev: "forged", Kind: audit.KindRun, RunID: "r_1", Outcome: audit.OutcomeExited, ExitCode: &code, Error: "a && b > c\n"},
		{},
	}
	for _, rec := range recs {
		if err := l.Write(rec); err != nil {
			t.Fatalf("Write: %v", err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	lines := readLines(t, path)
	want := []string{
		`{"seq":1,"time":"2026-03-04T04:06:07.00000089Z","prev":"` + zeroHash + `","kind":"run","run_id":"r_1","outcome":"exited","exit_code":0,"error":"a && b > c\n"}`,
		`{"seq":2,"time":"2026-03-04T04:06:07.00000089Z","prev":"` + hashOf(lines[0]) + `"}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("log has %d lines, want %d", len(lines), len(want))
	}
	for i := range want {
		if string(lines[i]) != want[i] {
			t.Errorf("line %d = %s, want %s", i+1, lines[i], want[i])
		}
	}
	var got audit.Record
	if err := json.Unmarshal(lines[0], &got); err != nil {
		t.Fatalf("line 1 does not decode into a Record: %v", err)
	}
	if got.Seq != 1 || got.Prev != zeroHash || got.ExitCode == nil || *got.ExitCode != 0 {
		t.Errorf("line 1 decodes to %+v, want seq 1, zero prev and exit code 0", got)
	}
}

func TestVerifyReportsTheBrokenLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	lines := readLines(t, writeLog(t, dir, 5))
	replace := func(line []byte, old, new string) []byte {
		if !bytes.Contains(line, []byte(old)) {
			t.Fatalf("line %s does not contain %q", line, old)
		}
		return bytes.Replace(line, []byte(old), []byte(new), 1)
	}
	tests := []struct {
		name       string
		content    []byte
		wantLine   int
		wantSeq    int64
		wantReason string
	}{
		{
			name:       "an edited value is caught at the next line",
			content:    join(lines[0], lines[1], replace(lines[2], "allow", "deny!"), lines[3], lines[4]),
			wantLine:   4,
			wantSeq:    4,
			wantReason: "prev hash does not match line 3",
		},
		{
			name:       "an edit that breaks the JSON is caught at its own line",
			content:    join(lines[0], lines[1], lines[2][:len(lines[2])-1], lines[3], lines[4]),
			wantLine:   3,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "an edited seq is caught at its own line",
			content:    join(lines[0], lines[1], replace(lines[2], `"seq":3`, `"seq":7`), lines[3], lines[4]),
			wantLine:   3,
			wantSeq:    7,
			wantReason: "seq 3 missing: found 7",
		},
		{
			name:       "an edited prev is caught at its own line",
			content:    join(lines[0], lines[1], replace(lines[2], `"prev":"`, `"prev":"f`), lines[3], lines[4]),
			wantLine:   3,
			wantSeq:    3,
			wantReason: "prev hash does not match line 2",
		},
		{
			name:       "a deleted line is caught where it was",
			content:    join(lines[0], lines[1], lines[3], lines[4]),
			wantLine:   3,
			wantSeq:    4,
			wantReason: "seq 3 missing: found 4",
		},
		{
			name:       "a deleted first line is caught at line 1",
			content:    join(lines[1], lines[2], lines[3], lines[4]),
			wantLine:   1,
			wantSeq:    2,
			wantReason: "seq 1 missing: found 2",
		},
		{
			name:       "swapped lines are caught at the first one",
			content:    join(lines[0], lines[1], lines[3], lines[2], lines[4]),
			wantLine:   3,
			wantSeq:    4,
			wantReason: "seq 3 missing: found 4",
		},
		{
			name:       "a repeated line is caught at the copy",
			content:    join(lines[0], lines[1], lines[2], lines[2], lines[3], lines[4]),
			wantLine:   4,
			wantSeq:    3,
			wantReason: "seq 4 expected: found 3",
		},
		{
			name:       "a truncated last line is caught at itself",
			content:    append(join(lines[:4]...), lines[4][:len(lines[4])/2]...),
			wantLine:   5,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a last line without its newline is caught at itself",
			content:    append(join(lines[:4]...), lines[4]...),
			wantLine:   5,
			wantReason: "line is not newline-terminated",
		},
		{
			name:       "an inserted blank line is caught at itself",
			content:    join(lines[0], lines[1], nil, lines[2], lines[3], lines[4]),
			wantLine:   3,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a line that is JSON but not an object is caught at itself",
			content:    join(lines[0], []byte("null"), lines[1]),
			wantLine:   2,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a CRLF line ending is caught at its line",
			content:    append(append([]byte{}, lines[0]...), append([]byte("\r\n"), join(lines[1:]...)...)...),
			wantLine:   1,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a first line whose prev is not zeros is caught at line 1",
			content:    join(replace(lines[0], `"prev":"0`, `"prev":"1`), lines[1]),
			wantLine:   1,
			wantSeq:    1,
			wantReason: "prev hash of the first line is not 64 zeros",
		},
		{
			name:       "a line without seq is caught at itself",
			content:    join(lines[0], replace(lines[1], `"seq":2,`, ``)),
			wantLine:   2,
			wantReason: "seq 2 missing: line has no seq",
		},
		{
			name:       "a line with a bad time is caught at itself",
			content:    join(lines[0], replace(lines[1], `"time":"2026`, `"time":"x026`)),
			wantLine:   2,
			wantSeq:    2,
			wantReason: "time is not RFC 3339",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			rep, err := audit.Verify(bytes.NewReader(tc.content))
			var be *audit.BreakError
			if !errors.As(err, &be) {
				t.Fatalf("Verify error = %v, want a *BreakError", err)
			}
			if !errors.Is(err, audit.ErrBroken) {
				t.Errorf("Verify error %v does not wrap ErrBroken", err)
			}
			if be.Line != tc.wantLine || be.Seq != tc.wantSeq || be.Reason != tc.wantReason {
				t.Errorf("Verify error = line %d seq %d %q, want line %d seq %d %q",
					be.Line, be.Seq, be.Reason, tc.wantLine, tc.wantSeq, tc.wantReason)
			}
			if rep.Lines != tc.wantLine-1 {
				t.Errorf("Verify report has %d good lines, want %d", rep.Lines, tc.wantLine-1)
			}
		})
	}
}

func TestVerifyCatchesEveryByteEdit(t *testing.T) {
	t.Parallel()
	lines := readLines(t, writeLog(t, t.TempDir(), 4))
	orig := join(lines...)
	origHash := hashOf(lines[len(lines)-1])
	start := 0
	for k, line := range lines {
		lineNo := k + 1
		for i := range line {
			data := bytes.Clone(orig)
			data[start+i] ^= 0x01
			rep, err := audit.Verify(bytes.NewReader(data))
			var be *audit.BreakError
			switch {
			case errors.As(err, &be):
				if be.Line != lineNo && be.Line != lineNo+1 {
					t.Errorf("byte %d of line %d edited: reported at line %d", i, lineNo, be.Line)
				}
			case err != nil:
				t.Errorf("byte %d of line %d edited: Verify error %v, want a *BreakError", i, lineNo, err)
			case lineNo < len(lines):
				t.Errorf("byte %d of line %d edited: Verify passed", i, lineNo)
			case rep.LastHash == origHash:
				t.Errorf("byte %d of the last line edited: LastHash unchanged", i)
			}
		}
		start += len(line) + 1
	}
}

func TestOpenContinuesTheChain(t *testing.T) {
	t.Parallel()
	path := writeLog(t, t.TempDir(), 3)
	for round := range 2 {
		l, err := audit.Open(path, audit.Options{})
		if err != nil {
			t.Fatalf("reopen %d: %v", round+1, err)
		}
		seq, hash := l.Head()
		lines := readLines(t, path)
		if seq != int64(len(lines)) || hash != hashOf(lines[len(lines)-1]) {
			t.Errorf("reopen %d: Head = %d %s, want %d %s", round+1, seq, hash, len(lines), hashOf(lines[len(lines)-1]))
		}
		for range 2 {
			if err := l.Write(audit.Record{Kind: audit.KindQuery, QueryID: "q_1"}); err != nil {
				t.Fatalf("Write: %v", err)
			}
		}
		if err := l.Close(); err != nil {
			t.Fatalf("Close: %v", err)
		}
	}
	rep, err := audit.VerifyFile(path)
	if err != nil {
		t.Fatalf("VerifyFile: %v", err)
	}
	if rep.Lines != 7 || rep.LastSeq != 7 {
		t.Errorf("VerifyFile = %+v, want 7 lines up to seq 7", rep)
	}
}

func TestOpenRefusesABadLastLine(t *testing.T) {
	t.Parallel()
	lines := readLines(t, writeLog(t, t.TempDir(), 3))
	tests := []struct {
		name       string
		content    []byte
		wantLine   int
		wantReason string
	}{
		{
			name:       "a truncated last line",
			content:    append(join(lines[:2]...), lines[2][:40]...),
			wantLine:   3,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a last line without its newline",
			content:    append(join(lines[:2]...), lines[2]...),
			wantLine:   3,
			wantReason: "line is not newline-terminated",
		},
		{
			name:       "a blank last line",
			content:    join(lines[0], lines[1], lines[2], nil),
			wantLine:   4,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a file that is not a log",
			content:    []byte("hello\nworld\n"),
			wantLine:   2,
			wantReason: "line is not a JSON record",
		},
		{
			name:       "a record without seq",
			content:    []byte(`{"time":"2026-01-01T00:00:00Z","prev":"` + zeroHash + `"}` + "\n"),
			wantLine:   1,
			wantReason: "line has no positive seq",
		},
		{
			name:       "a record whose prev is not a hash",
			content:    []byte(`{"seq":1,"time":"2026-01-01T00:00:00Z","prev":"00"}` + "\n"),
			wantLine:   1,
			wantReason: "prev is not a hex SHA-256",
		},
		{
			name:       "a record whose prev is upper-case hex",
			content:    []byte(`{"seq":1,"time":"2026-01-01T00:00:00Z","prev":"` + strings.Repeat("A", 64) + `"}` + "\n"),
			wantLine:   1,
			wantReason: "prev is not a hex SHA-256",
		},
		{
			name:       "a record without time",
			content:    []byte(`{"seq":1,"prev":"` + zeroHash + `"}` + "\n"),
			wantLine:   1,
			wantReason: "time is not RFC 3339",
		},
		{
			name:       "a last line longer than the read chunk",
			content:    append(join(lines[0]), bytes.Repeat([]byte("x"), 100<<10)...),
			wantLine:   2,
			wantReason: "line is not a JSON record",
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.log")
			if err := os.WriteFile(path, tc.content, 0o600); err != nil {
				t.Fatalf("write log: %v", err)
			}
			l, err := audit.Open(path, audit.Options{})
			if err == nil {
				l.Close()
				t.Fatalf("Open succeeded, want an error")
			}
			var be *audit.BreakError
			if !errors.As(err, &be) {
				t.Fatalf("Open error = %v, want a *BreakError", err)
			}
			if be.Line != tc.wantLine || be.Reason != tc.wantReason {
				t.Errorf("Open error = line %d %q, want line %d %q", be.Line, be.Reason, tc.wantLine, tc.wantReason)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("Open error %q does not name the file", err)
			}
			after, rerr := os.ReadFile(path)
			if rerr != nil || !bytes.Equal(after, tc.content) {
				t.Errorf("Open changed the refused file")
			}
		})
	}
}

func TestOpenRefusesWhatIsNotALogFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name string
		path string
	}{
		{name: "a directory is refused", path: dir},
		{name: "a file in a missing directory is refused", path: filepath.Join(dir, "missing", "audit.log")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := audit.Open(tc.path, audit.Options{})
			if err == nil {
				l.Close()
				t.Fatalf("Open(%s) succeeded, want an error", tc.path)
			}
		})
	}
}

func TestOpenCreatesAPrivateFile(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	defer l.Close()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatalf("stat: %v", err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("new log has mode %v, want 0600", got)
	}
}

func TestOpenRefusesALogInUse(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	first, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	second, err := audit.Open(path, audit.Options{})
	if !errors.Is(err, audit.ErrLocked) {
		if second != nil {
			second.Close()
		}
		t.Errorf("second Open error = %v, want ErrLocked", err)
	}
	if err := first.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	third, err := audit.Open(path, audit.Options{})
	if err != nil {
		t.Fatalf("Open after Close: %v", err)
	}
	third.Close()
}

func TestWriteAfterCloseFails(t *testing.T) {
	t.Parallel()
	l, err := audit.Open(filepath.Join(t.TempDir(), "audit.log"), audit.Options{})
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if err := l.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
	if err := l.Write(audit.Record{Kind: audit.KindQuery}); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("Write after Close = %v, want ErrClosed", err)
	}
	if err := l.Close(); !errors.Is(err, audit.ErrClosed) {
		t.Errorf("second Close = %v, want ErrClosed", err)
	}
}

func TestConcurrentWritesMakeOneChain(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		opts audit.Options
	}{
		{name: "concurrent writes chain without sync"},
		{name: "concurrent writes chain with sync", opts: audit.Options{Sync: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.log")
			l, err := audit.Open(path, tc.opts)
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			const writers, each = 8, 50
			var wg sync.WaitGroup
			errs := make(chan error, writers*each)
			for w := range writers {
				wg.Go(func() {
					for i := range each {
						errs <- l.Write(audit.Record{Kind: audit.KindEgress, RunID: fmt.Sprintf("r_%d_%d", w, i), Host: "example.com", Port: 443})
					}
				})
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				if err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			rep, err := audit.VerifyFile(path)
			if err != nil {
				t.Fatalf("VerifyFile: %v", err)
			}
			if rep.Lines != writers*each {
				t.Errorf("VerifyFile found %d lines, want %d", rep.Lines, writers*each)
			}
			seen := map[string]bool{}
			for _, line := range readLines(t, path) {
				var rec audit.Record
				if err := json.Unmarshal(line, &rec); err != nil {
					t.Fatalf("decode line: %v", err)
				}
				seen[rec.RunID] = true
			}
			if len(seen) != writers*each {
				t.Errorf("log holds %d distinct records, want %d", len(seen), writers*each)
			}
		})
	}
}

func TestWriteMasksSecretsWithoutTouchingTheInput(t *testing.T) {
	t.Parallel()
	type login struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	tests := []struct {
		name  string
		input func() any // called twice: once to write, once to compare
		want  string     // tool_input as written, compacted JSON
	}{
		{
			name: "secrets in nested maps and arrays are masked",
			input: func() any {
				return map[string]any{
					"command": "curl",
					"api_key": "k1",
					"headers": map[string]any{"Authorization": "Bearer t", "X-Api-Key": "k2", "Accept": "json"},
					"items":   []any{map[string]any{"password": "p", "name": "n"}, "plain", []any{map[string]any{"Set-Cookie": "c"}}},
				}
			},
			want: `{"api_key":"***","command":"curl","headers":{"Accept":"json","Authorization":"***","X-Api-Key":"***"},"items":[{"name":"n","password":"***"},"plain",[{"Set-Cookie":"***"}]]}`,
		},
		{
			name:  "a whole object under a secret key is masked",
			input: func() any { return map[string]any{"credentials": map[string]any{"user": "u"}, "n": 1.5} },
			want:  `{"credentials":"***","n":1.5}`,
		},
		{
			name: "case and separators do not hide a secret",
			input: func() any {
				return map[string]any{"PRIVATE-KEY": 1, "aws_secret_access_key": 2, "SessionId": 3, "ACCESS_KEY_ID": 4, "GITHUB_TOKEN": 5, "PassWd": 6, "pass": 7, "key": 8}
			},
			want: `{"ACCESS_KEY_ID":"***","GITHUB_TOKEN":"***","PRIVATE-KEY":"***","PassWd":"***","SessionId":"***","aws_secret_access_key":"***","key":8,"pass":7}`,
		},
		{
			name:  "a json.RawMessage is decoded, masked and its numbers kept exact",
			input: func() any { return json.RawMessage(`{"token":"t","n":12345678901234567890,"a":[{"secret":1}]}`) },
			want:  `{"a":[{"secret":"***"}],"n":12345678901234567890,"token":"***"}`,
		},
		{
			name:  "a []byte holding a JSON object is decoded and masked",
			input: func() any { return []byte(` {"cookie":"c","path":"/x"}`) },
			want:  `{"cookie":"***","path":"/x"}`,
		},
		{
			name:  "a []byte that is not JSON stays bytes",
			input: func() any { return []byte("token") },
			want:  `"dG9rZW4="`,
		},
		{
			name:  "a struct is masked through its JSON",
			input: func() any { return login{User: "u", Password: "p"} },
			want:  `{"password":"***","user":"u"}`,
		},
		{
			name:  "a typed map is masked through its JSON",
			input: func() any { return map[string]string{"session_id": "s", "file_path": "/x"} },
			want:  `{"file_path":"/x","session_id":"***"}`,
		},
		{
			name:  "an input without secrets is written as it is",
			input: func() any { return map[string]any{"file_path": "/srv/app/main.go", "limit": 10.0} },
			want:  `{"file_path":"/srv/app/main.go","limit":10}`,
		},
		{
			name:  "a scalar input is written as it is",
			input: func() any { return "password" },
			want:  `"password"`,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.log")
			l, err := audit.Open(path, audit.Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			input := tc.input()
			if err := l.Write(audit.Record{Kind: audit.KindDecision, ToolInput: input}); err != nil {
				t.Fatalf("Write: %v", err)
			}
			if err := l.Close(); err != nil {
				t.Fatalf("Close: %v", err)
			}
			var line struct {
				ToolInput json.RawMessage `json:"tool_input"`
			}
			if err := json.Unmarshal(readLines(t, path)[0], &line); err != nil {
				t.Fatalf("decode line: %v", err)
			}
			if string(line.ToolInput) != tc.want {
				t.Errorf("tool_input = %s, want %s", line.ToolInput, tc.want)
			}
			if fresh := tc.input(); !reflect.DeepEqual(input, fresh) {
				t.Errorf("Write changed the caller's input to %#v, want %#v", input, fresh)
			}
		})
	}
}

func BenchmarkWrite(b *testing.B) {
	rec := audit.Record{
		Kind:           audit.KindDecision,
		DecisionID:     "d_0b6f3c1e-8f7a-4c1e-9b1a-2f4c6d8e0a1b",
		QueryID:        "q_6b0c2d4e",
		ToolUseID:      "toolu_01ABCDEFGHIJKLMNOPQRSTUV",
		Tool:           "Bash",
		Event:          "PreToolUse",
		Decision:       "allow",
		Rule:           "bash.readonly",
		Reason:         "The command only reads files inside the workspace.",
		PolicyRevision: "sha256:4f1c0e5b",
		Client:         "claude-agent-sdk/0.1",
	}
	inputs := []struct {
		name  string
		input any
	}{
		{name: "map", input: map[string]any{"command": "ls -la /srv/app", "description": "List files", "timeout": 120000.0}},
		{name: "raw", input: json.RawMessage(`{"command":"ls -la /srv/app","description":"List files","timeout":120000}`)},
		{name: "map with secret", input: map[string]any{"url": "https://api.example.com", "headers": map[string]any{"Authorization": "Bearer x"}}},
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			l, err := audit.Open(filepath.Join(b.TempDir(), "audit.log"), audit.Options{})
			if err != nil {
				b.Fatalf("Open: %v", err)
			}
			defer l.Close()
			rec := rec
			rec.ToolInput = in.input
			b.ReportAllocs()
			for b.Loop() {
				if err := l.Write(rec); err != nil {
					b.Fatalf("Write: %v", err)
				}
			}
		})
	}
	b.Run("map parallel", func(b *testing.B) {
		l, err := audit.Open(filepath.Join(b.TempDir(), "audit.log"), audit.Options{})
		if err != nil {
			b.Fatalf("Open: %v", err)
		}
		defer l.Close()
		rec := rec
		rec.ToolInput = inputs[0].input
		b.ReportAllocs()
		b.RunParallel(func(pb *testing.PB) {
			for pb.Next() {
				if err := l.Write(rec); err != nil {
					b.Errorf("Write: %v", err)
					return
				}
			}
		})
	})
}
