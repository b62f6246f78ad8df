package audit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// nextAll calls Next until it returns nothing and collects the lines as
// strings, and whether any call reported a restart.
func nextAll(t *testing.T, fl *audit.Follower) (lines []string, restarted bool) {
	t.Helper()
	for {
		ls, r, err := fl.Next()
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		restarted = restarted || r
		if len(ls) == 0 {
			return lines, restarted
		}
		for _, l := range ls {
			lines = append(lines, string(l))
		}
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
	fl := audit.NewFollower(path)
	defer fl.Close()

	if got, _ := nextAll(t, fl); len(got) != 0 {
		t.Fatalf("a missing file gave lines %q", got)
	}
	appendFile(t, path, "one\ntw")
	got, restarted := nextAll(t, fl)
	if !reflect.DeepEqual(got, []string{"one"}) || !restarted {
		t.Fatalf("first read: lines %q restarted %v, want [one] and a start", got, restarted)
	}
	appendFile(t, path, "o\nthree\n")
	if got, restarted := nextAll(t, fl); !reflect.DeepEqual(got, []string{"two", "three"}) || restarted {
		t.Fatalf("after the rest of a torn line: %q restarted %v, want [two three] and no restart", got, restarted)
	}
}

func TestFollowerFollowsARotation(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	appendFile(t, path, "a1\n")
	fl := audit.NewFollower(path)
	defer fl.Close()
	nextAll(t, fl)

	// The writer adds a last line to the old file, then rotates it away.
	appendFile(t, path, "a2\n")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "b1\n")
	got, restarted := nextAll(t, fl)
	if !reflect.DeepEqual(got, []string{"a2", "b1"}) || !restarted {
		t.Fatalf("across a rotation: %q restarted %v, want [a2 b1] and a restart", got, restarted)
	}
}

func TestFollowerStartsOverWhenTheFileShrinks(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	appendFile(t, path, "old line one\nold line two\n")
	fl := audit.NewFollower(path)
	defer fl.Close()
	nextAll(t, fl)
	if err := os.Truncate(path, 0); err != nil {
		t.Fatal(err)
	}
	appendFile(t, path, "new\n")
	got, restarted := nextAll(t, fl)
	if !reflect.DeepEqual(got, []string{"new"}) || !restarted {
		t.Fatalf("after a truncation: %q restarted %v, want [new] and a restart", got, restarted)
	}
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
