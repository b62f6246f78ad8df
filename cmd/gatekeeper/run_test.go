package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// runPolicy lets sandboxed runs of up to 2 s bring in up to two files of
// 10 bytes between them.
const runPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
sandbox:
  proc: {timeout: 2s}
  output: {max_files: 2, max_files_bytes: 10}
`

// TestRunRefusesWhatServeRefuses pins that `gatekeeper run` and the
// sidecar's run handler build a run the one way (gate.Effective.RunSpec):
// each request is given to run as flags and, after an allowed decide, to
// a real sidecar as a run frame. Both refuse it with the same message, or
// both let it past every check of the policy: the sidecar, which has no
// runner, then answers runner_unavailable, and run, given a backend that
// does not exist, names the backend, which it opens only after the checks.
// So run builds its Spec as serve does: a timeout and files are checked,
// and a language the sidecar refuses never reaches the engine.
func TestRunRefusesWhatServeRefuses(t *testing.T) {
	dir, file := writePolicy(t, runPolicy)
	side := startWSSidecar(t, file)
	local := func(name, content string) string {
		p := filepath.Join(dir, name)
		must(t, os.WriteFile(p, []byte(content), 0o644))
		return p
	}
	small, big := local("small.txt", "12345"), local("big.txt", "12345678901")
	type runFile struct{ path, local, content string }
	tests := []struct {
		name      string
		language  string
		timeoutMS int64 // 0: none asked
		files     []runFile
		want      string // the message both give; "" when both let it through
	}{
		{name: "a timeout past sandbox.proc.timeout", language: "python", timeoutMS: 2001,
			want: "run: timeout_ms 2001 exceeds the query's sandbox.proc.timeout of 2s"},
		{name: "more files than sandbox.output.max_files", language: "python",
			files: []runFile{{"a", small, "12345"}, {"b", small, "12345"}, {"c", small, "12345"}},
			want:  "run: files holds 3 files of 15 bytes; the query's sandbox.output allows 2 files of 10 (max_files, max_files_bytes)"},
		{name: "more bytes than sandbox.output.max_files_bytes", language: "sh",
			files: []runFile{{"in/big.txt", big, "12345678901"}},
			want:  "run: files holds 1 files of 11 bytes; the query's sandbox.output allows 2 files of 10 (max_files, max_files_bytes)"},
		{name: "a timeout and files at the limits", language: "python", timeoutMS: 2000,
			files: []runFile{{"a", small, "12345"}, {"b", small, "12345"}}},
		{name: "no timeout asked and no files", language: "node"},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			args := []string{"run", "--policy", file, "--lang", tc.language, "--runner", "podman", "-c", "print(1)"}
			run := map[string]any{"type": "run", "id": "r", "query_id": side.query, "tool_use_id": fmt.Sprintf("toolu_%d", i),
				"language": tc.language, "code": "print(1)"}
			if tc.timeoutMS != 0 {
				args = append(args, "--timeout-ms", fmt.Sprint(tc.timeoutMS))
				run["timeout_ms"] = tc.timeoutMS
			}
			if tc.files != nil {
				files := map[string]string{}
				for _, f := range tc.files {
					args = append(args, "--file", f.path+"="+f.local)
					files[f.path] = f.content
				}
				run["files"] = files
			}
			frame, err := json.Marshal(run)
			must(t, err)
			input, err := json.Marshal(map[string]any{"language": tc.language, "code": "print(1)"})
			must(t, err)
			d := side.do(t, fmt.Sprintf(`{"type":"decide","id":"d","query_id":%q,"event":"PreToolUse","tool_name":"mcp__sandboxed_code__run","tool_input":%s,"tool_use_id":"toolu_%d","mcp_server":{"name":"sandboxed_code","source":"sdk"}}`, side.query, input, i))
			if d["decision"] != "allow" {
				t.Fatalf("decide: %v; want allow", d)
			}
			r := side.do(t, string(frame))
			out, err := cli(t, "", args...)
			if tc.want == "" {
				if r["code"] != "runner_unavailable" {
					t.Errorf("serve: %v; want runner_unavailable (past every check)", r)
				}
				if err == nil || err.Error() != `--runner "podman": want docker or kube` {
					t.Errorf("run: %v\n%s\nwant the backend named (past every check)", err, out)
				}
				return
			}
			if r["code"] != "invalid_field" || r["message"] != tc.want {
				t.Errorf("serve: %v; want invalid_field %q", r, tc.want)
			}
			if err == nil || err.Error() != tc.want {
				t.Errorf("run: %v\n%s\nwant %q", err, out, tc.want)
			}
		})
	}
}

// TestRunFileFlags: --file reads a local file to a path of /workspace
// (its base name by default) and refuses what it cannot read or place.
func TestRunFileFlags(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	p := filepath.Join(dir, "data.csv")
	must(t, os.WriteFile(p, []byte("a,b\n"), 0o644))
	got, err := readRunFiles([]string{p, "in/copy.csv=" + p})
	if err != nil || len(got) != 2 || got["data.csv"] != "a,b\n" || got["in/copy.csv"] != "a,b\n" {
		t.Fatalf("readRunFiles = %q, %v; want data.csv and in/copy.csv", got, err)
	}
	for _, tc := range []struct {
		arg  []string
		want string
	}{
		{[]string{"x=" + p, "x=" + p}, "x is given twice"},
		{[]string{"=" + p}, "want [PATH=]LOCAL"},
		{[]string{"x="}, "want [PATH=]LOCAL"},
		{[]string{filepath.Join(dir, "absent")}, "no such file"},
	} {
		if _, err := readRunFiles(tc.arg); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("readRunFiles(%q) = %v; want an error saying %q", tc.arg, err, tc.want)
		}
	}
}
