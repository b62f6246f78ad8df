package main

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// writeAuditLog writes n decision records to the log at path, rotating at
// every record after the first (lines are larger than MaxBytes), so that
// its files are PATH.000000000001 (seq 1), PATH.000000000002 (seq 2-3),
// PATH.000000000004 (seq 4-5), … and PATH. It returns the log's head.
func writeAuditLog(t *testing.T, path string, n int, opts audit.Options) (int64, string) {
	t.Helper()
	opts.MaxBytes = 10
	l, err := audit.Open(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	for i := 1; i <= n; i++ {
		if err := l.Write(audit.Record{Kind: audit.KindDecision, Tool: "Read", Decision: "allow", DecisionID: fmt.Sprintf("d_%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	seq, hash := l.Head()
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	return seq, hash
}

// headFile writes checkpoints of seq 0 and of the given head to dir/head.jsonl.
func headFile(t *testing.T, dir, log string, seq int64, hash string) string {
	t.Helper()
	var b []byte
	b = audit.AppendHead(b, audit.Head{Log: log, File: filepath.Base(log), Seq: 0, Hash: strings.Repeat("0", 64), Time: time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)})
	b = audit.AppendHead(b, audit.Head{Log: log, File: filepath.Base(log), Seq: seq, Hash: hash, Time: time.Date(2026, 5, 1, 12, 0, 10, 0, time.UTC)})
	path := filepath.Join(dir, "head.jsonl")
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func cutLastLine(t *testing.T, path string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	i := bytes.LastIndexByte(data[:len(data)-1], '\n')
	if err := os.WriteFile(path, data[:i+1], 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestAuditVerifyCLI(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup writes the logs into dir and returns verify's arguments and
		// its stdin.
		setup    func(t *testing.T, dir string) ([]string, string)
		wantCode int
	}{
		{
			name: "audit_verify_ok_one_file",
			setup: func(t *testing.T, dir string) ([]string, string) {
				l, _ := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{})
				for _, tool := range []string{"Read", "Bash", "Write"} {
					l.Write(audit.Record{Kind: audit.KindDecision, Tool: tool, Decision: "deny", Rule: "r"})
				}
				l.Close()
				return []string{filepath.Join(dir, "audit.jsonl")}, ""
			},
		},
		{
			name: "audit_verify_edited_line",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				l, _ := audit.Open(path, audit.Options{})
				for _, tool := range []string{"Read", "Bash", "Write"} {
					l.Write(audit.Record{Kind: audit.KindDecision, Tool: tool, Decision: "deny", Rule: "r"})
				}
				l.Close()
				data, _ := os.ReadFile(path)
				os.WriteFile(path, bytes.Replace(data, []byte(`"tool":"Bash"`), []byte(`"tool":"Read"`), 1), 0o600)
				return []string{path}, ""
			},
			wantCode: 1,
		},
		{
			name: "audit_verify_rotated_compressed",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				writeAuditLog(t, path, 4, audit.Options{Compress: true})
				return []string{path}, ""
			},
		},
		{
			name: "audit_verify_directory_of_two_logs",
			setup: func(t *testing.T, dir string) ([]string, string) {
				writeAuditLog(t, filepath.Join(dir, "audit.jsonl"), 3, audit.Options{})
				l, _ := audit.Open(filepath.Join(dir, "other.jsonl"), audit.Options{})
				l.Write(audit.Record{Kind: audit.KindQuery})
				l.Close()
				os.WriteFile(filepath.Join(dir, "token"), []byte("not a log\n"), 0o600)
				return []string{dir}, ""
			},
		},
		{
			name: "audit_verify_pruned_by_retention",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				writeAuditLog(t, path, 5, audit.Options{Keep: 2})
				return []string{path}, ""
			},
		},
		{
			name: "audit_verify_missing_file",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				writeAuditLog(t, path, 4, audit.Options{})
				os.Remove(path + ".000000000002")
				return []string{path}, ""
			},
			wantCode: 1,
		},
		{
			name: "audit_verify_files_out_of_order",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				writeAuditLog(t, path, 4, audit.Options{})
				return []string{path + ".000000000001", path + ".000000000004", path + ".000000000002", path}, ""
			},
			wantCode: 1,
		},
		{
			name: "audit_verify_partial",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				writeAuditLog(t, path, 4, audit.Options{})
				return []string{"--partial", path + ".000000000004", path}, ""
			},
		},
		{
			name: "audit_verify_head_ok",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				seq, hash := writeAuditLog(t, path, 3, audit.Options{})
				return []string{"--head", headFile(t, dir, path, seq, hash), path}, ""
			},
		},
		{
			name: "audit_verify_head_cut_off",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				seq, hash := writeAuditLog(t, path, 3, audit.Options{})
				heads := headFile(t, dir, path, seq, hash)
				cutLastLine(t, path)
				return []string{"--head", heads, path}, ""
			},
			wantCode: 1,
		},
		{
			name: "audit_verify_head_from_syslog_on_stdin",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				seq, hash := writeAuditLog(t, path, 3, audit.Options{})
				data, _ := os.ReadFile(headFile(t, dir, path, seq, hash))
				var stdin strings.Builder
				for _, line := range strings.SplitAfter(string(data), "\n") {
					if line != "" {
						stdin.WriteString("May  1 12:00:10 host gatekeeper[42]: " + line + "May  1 12:00:11 host cron[7]: other\n")
					}
				}
				return []string{"--head", "-", path}, stdin.String()
			},
		},
		{
			name: "audit_verify_head_of_another_log",
			setup: func(t *testing.T, dir string) ([]string, string) {
				path := filepath.Join(dir, "audit.jsonl")
				seq, hash := writeAuditLog(t, path, 3, audit.Options{})
				return []string{"--head", headFile(t, dir, filepath.Join(dir, "elsewhere.jsonl"), seq, hash), path}, ""
			},
			wantCode: 1,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args, stdin := tc.setup(t, dir)
			out, err := cli(t, stdin, append([]string{"audit", "verify"}, args...)...)
			code := 0
			if e, ok := err.(exitError); ok {
				code = int(e)
			} else if err != nil {
				t.Fatalf("err = %v; output:\n%s", err, out)
			}
			if code != tc.wantCode {
				t.Errorf("exit code %d, want %d; output:\n%s", code, tc.wantCode, out)
			}
			golden(t, tc.name, dir, out)
		})
	}
}

func TestAuditVerifyUsage(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{name: "no path is a usage error", args: nil, wantErr: "exit status 2"},
		{name: "a directory without logs", args: []string{"DIR"}, wantErr: "no audit log in"},
		{name: "a missing log", args: []string{"DIR/none.jsonl"}, wantErr: "none.jsonl: file does not exist"},
		{name: "a missing head file", args: []string{"--head", "DIR/none", "DIR/none.jsonl"}, wantErr: "no such file or directory"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			args := []string{"audit", "verify"}
			for _, a := range tc.args {
				args = append(args, strings.ReplaceAll(a, "DIR", dir))
			}
			out, err := cli(t, "", args...)
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("err = %v, want %q; output:\n%s", err, tc.wantErr, out)
			}
		})
	}
}

func TestAuditVerifyReportsAnUnreadableFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := filepath.Join(dir, "audit.jsonl")
	writeAuditLog(t, path, 3, audit.Options{})
	// A directory where a file of the list should be cannot be read.
	out, err := cli(t, "", "audit", "verify", path+".000000000001", dir, path)
	if err == nil || !strings.Contains(err.Error(), "is a directory") {
		t.Errorf("verify of a list with a directory in it = %v, want a read error; output:\n%s", err, out)
	}
	if _, ok := err.(exitError); ok {
		t.Errorf("verify of an unreadable file ended with an exit status, want the error")
	}
}

// TestAuditLogDirectoryIsMadeOnFirstStart: serve's default audit log lies
// under ~/.local/state/gatekeeper, which a new user's machine does not have.
func TestAuditLogDirectoryIsMadeOnFirstStart(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "state", "gatekeeper", "audit.jsonl")
	o := auditOptions{path: path}
	var out bytes.Buffer
	l, closeLog, err := o.open(&out, &out, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatalf("open %s: %v", path, err)
	}
	if err := l.Write(audit.Record{Kind: audit.KindDecision, Tool: "Read", Decision: "allow", DecisionID: "d_1"}); err != nil {
		t.Fatal(err)
	}
	closeLog()
	fi, err := os.Stat(filepath.Dir(path))
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("the audit log's directory has mode %v, want 0700", fi.Mode().Perm())
	}
	if data, err := os.ReadFile(path); err != nil || !bytes.Contains(data, []byte(`"d_1"`)) {
		t.Errorf("the audit log holds %q (%v), want the record", data, err)
	}
}
