package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// writerFunc is an io.Writer made of a function.
type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

var errDiskFull = errors.New("disk full")

func TestFailedWriteLeavesTheChainAsItWas(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup breaks l; it returns the record to write.
		setup func(t *testing.T, l *Log) Record
		// wantErr is wrapped by Write's error.
		wantErr error
		// usable says whether the Log takes writes after the failure once
		// its writer and file are restored.
		usable bool
		// refusedUntilRestored says whether writes fail, with an error
		// wrapping ErrTorn, until the file is restored.
		refusedUntilRestored bool
	}{
		{
			name: "a writer that fails before writing",
			setup: func(_ *testing.T, l *Log) Record {
				l.w = writerFunc(func([]byte) (int, error) { return 0, errDiskFull })
				return Record{Kind: KindDecision}
			},
			wantErr: errDiskFull,
			usable:  true,
		},
		{
			name: "a writer that fails after half the line has its half cut off",
			setup: func(_ *testing.T, l *Log) Record {
				l.w = writerFunc(func(p []byte) (int, error) {
					n, _ := l.f.Write(p[:len(p)/2])
					return n, errDiskFull
				})
				return Record{Kind: KindDecision}
			},
			wantErr: errDiskFull,
			usable:  true,
		},
		{
			name: "a short write without an error is a failure",
			setup: func(_ *testing.T, l *Log) Record {
				l.w = writerFunc(func(p []byte) (int, error) { return l.f.Write(p[:len(p)-1]) })
				return Record{Kind: KindDecision}
			},
			wantErr: io.ErrShortWrite,
			usable:  true,
		},
		{
			name: "a tool_input that is not JSON fails before writing",
			setup: func(*testing.T, *Log) Record {
				return Record{Kind: KindDecision, ToolInput: json.RawMessage(`{"command":`)}
			},
			usable: true,
		},
		{
			name: "a tool_input with data after its JSON fails before writing",
			setup: func(*testing.T, *Log) Record {
				return Record{Kind: KindDecision, ToolInput: json.RawMessage(`{"a":1} {"b":2}`)}
			},
			wantErr: errTrailingData,
			usable:  true,
		},
		{
			name: "a tool_input that cannot be encoded fails before writing",
			setup: func(*testing.T, *Log) Record {
				return Record{Kind: KindDecision, ToolInput: map[string]any{"c": make(chan int)}}
			},
			usable: true,
		},
		{
			name: "a tool_input that contains itself fails before writing",
			setup: func(*testing.T, *Log) Record {
				m := map[string]any{}
				m["self"] = m
				return Record{Kind: KindDecision, ToolInput: m}
			},
			wantErr: errTooDeep,
			usable:  true,
		},
		{
			name: "a file closed under the log",
			setup: func(_ *testing.T, l *Log) Record {
				l.f.Close()
				return Record{Kind: KindDecision}
			},
			wantErr: os.ErrClosed,
		},
		{
			name: "a partial line that cannot be cut is cut by a later write",
			setup: func(t *testing.T, l *Log) Record {
				// A read-only descriptor of the same file cannot truncate it.
				ro, err := os.Open(l.path)
				if err != nil {
					t.Fatalf("open read-only: %v", err)
				}
				t.Cleanup(func() { ro.Close() })
				rw := l.f
				l.w = writerFunc(func(p []byte) (int, error) {
					n, _ := rw.Write(p[:len(p)/2])
					return n, errDiskFull
				})
				l.f = ro
				t.Cleanup(func() { l.f = rw })
				return Record{Kind: KindDecision}
			},
			wantErr:              ErrTorn,
			usable:               true,
			refusedUntilRestored: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			path := filepath.Join(t.TempDir(), "audit.log")
			l, err := Open(path, Options{})
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			rw := l.f
			defer func() { l.f = rw; l.Close() }()
			for range 2 {
				if err := l.Write(Record{Kind: KindQuery}); err != nil {
					t.Fatalf("Write: %v", err)
				}
			}
			seq, hash := l.Head()
			good, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			rec := tc.setup(t, l)
			err = l.Write(rec)
			if err == nil {
				t.Fatalf("Write succeeded, want an error")
			}
			if tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Errorf("Write error = %v, want one wrapping %v", err, tc.wantErr)
			}
			if s, h := l.Head(); s != seq || h != hash {
				t.Errorf("Head after failure = %d %s, want %d %s", s, h, seq, hash)
			}
			if !tc.usable {
				if err := l.Write(Record{Kind: KindQuery}); err == nil {
					t.Errorf("Write after an unrecoverable failure succeeded")
				}
				return
			}
			l.w = rw
			if tc.refusedUntilRestored {
				if err := l.Write(Record{Kind: KindQuery}); !errors.Is(err, ErrTorn) {
					t.Errorf("Write before the file can be cut = %v, want an error wrapping ErrTorn", err)
				}
				l.f = rw
			} else if now, err := os.ReadFile(path); err != nil || !bytes.Equal(now, good) {
				t.Errorf("after the failed Write the file is %q (%v), want it as before: %q", now, err, good)
			}
			if err := l.Write(Record{Kind: KindQuery}); err != nil {
				t.Fatalf("Write after failure: %v", err)
			}
			rep, err := VerifyFile(path)
			if err != nil {
				t.Fatalf("VerifyFile: %v", err)
			}
			if rep.Lines != 3 {
				t.Errorf("VerifyFile found %d lines, want 3", rep.Lines)
			}
		})
	}
}

func TestIsSecretKey(t *testing.T) {
	t.Parallel()
	tests := []struct {
		key  string
		want bool
	}{
		{key: "password", want: true},
		{key: "Authorization", want: true},
		{key: "api_key", want: true},
		{key: "X-Api-Key", want: true},
		{key: "x_API-kEy", want: true},
		{key: "client_secret", want: true},
		{key: "refresh_token", want: true},
		{key: "db-passwd", want: true},
		{key: "Private_Key", want: true},
		{key: "Cookie", want: true},
		{key: "JSESSIONID", want: true},
		{key: "session_id", want: true},
		{key: "AWS_ACCESS_KEY_ID", want: true},
		{key: "credentials", want: true},
		{key: "ＰＡＳＳＷＯＲＤ", want: false}, // full-width letters are other letters
		{key: "PASSWÖRD_token", want: true},
		{key: "pass", want: false},
		{key: "key", want: false},
		{key: "api", want: false},
		{key: "session", want: false},
		{key: "file_path", want: false},
		{key: "", want: false},
		{key: "a_very_long_key_name_that_goes_past_the_stack_buffer_and_ends_in_a_token", want: true},
	}
	for _, tc := range tests {
		t.Run("key "+tc.key, func(t *testing.T) {
			t.Parallel()
			if got := isSecretKey(tc.key); got != tc.want {
				t.Errorf("isSecretKey(%q) = %v, want %v", tc.key, got, tc.want)
			}
		})
	}
}

// BenchmarkWriteNoIO is BenchmarkWrite without the write system call: the
// cost Write adds on top of the disk.
func BenchmarkWriteNoIO(b *testing.B) {
	l, err := Open(filepath.Join(b.TempDir(), "audit.log"), Options{})
	if err != nil {
		b.Fatalf("Open: %v", err)
	}
	defer l.Close()
	l.w = io.Discard
	rec := Record{
		Kind: KindDecision, DecisionID: "d_0b6f3c1e-8f7a-4c1e-9b1a-2f4c6d8e0a1b", QueryID: "q_6b0c2d4e",
		ToolUseID: "toolu_01ABCDEFGHIJKLMNOPQRSTUV", Tool: "Bash", Event: "PreToolUse", Decision: "allow",
		Rule: "bash.readonly", Reason: "The command only reads files inside the workspace.",
		ToolInput: map[string]any{"command": "ls -la /srv/app", "description": "List files", "timeout": 120000.0},
	}
	b.ReportAllocs()
	for b.Loop() {
		if err := l.Write(rec); err != nil {
			b.Fatalf("Write: %v", err)
		}
	}
}
