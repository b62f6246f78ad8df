package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/artifacts"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// writeArtifacts writes two runs' artifacts, as serve would, at fixed times.
func writeArtifacts(t *testing.T) (dir string, names []string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "artifacts")
	d, err := artifacts.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 11, 21, 15, 2, 11, 0, time.UTC)
	runs := []struct {
		run   artifacts.Run
		store artifacts.StoreCode
	}{
		{artifacts.Run{RunID: "r_0b5e", QueryID: "q_6b0c", ToolUseID: "toolu_01", Client: "agent/1", PolicyHash: "sha256:9e2d", Language: "python",
			Code: "import csv\nprint(sum(int(r['n']) for r in csv.DictReader(open('in.csv'))))\n", Files: map[string]string{"in.csv": "n\n1\n2\n"},
			Report: wire.NewRunReport(runner.Result{RunID: "r_0b5e", Reason: runner.Exited, Stdout: "3\n", Duration: 212 * time.Millisecond, Image: "gatekeeper-sandbox:python", Runtime: runner.Runc,
				Files:     []runner.File{{Path: "sum.txt", Size: 2, SHA256: "1121cfccd5913f0a63fec40a6ffd44ea64f9dc135c66634ba001d10bcf4302a2", Change: runner.FileCreated, MediaType: "text/plain; charset=utf-8", Content: []byte("3\n")}},
				Workspace: runner.WorkspaceSaved})}, artifacts.OnError},
		{artifacts.Run{RunID: "r_7c21", QueryID: "q_6b0c", ToolUseID: "toolu_02", Client: "agent/1", PolicyHash: "sha256:9e2d", Language: "sh",
			Code: "while :; do :; done", Report: wire.NewRunReport(runner.Result{RunID: "r_7c21", Reason: runner.TimedOut, ExitCode: 137, Duration: 10 * time.Second, Image: "gatekeeper-sandbox:python", Runtime: runner.Runc,
				Workspace: runner.WorkspaceNotSaved, WorkspaceNote: "the run timed out, so /workspace was not saved: the next run starts from it as it was before this run"})}, artifacts.OnError},
	}
	for i, r := range runs {
		name, _, err := d.Write(artifacts.New(r.run, at.Add(time.Duration(i)*time.Minute), r.store))
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return dir, names
}

func TestRunsListAndShow(t *testing.T) {
	dir, names := writeArtifacts(t)
	out, err := cli(t, "", "runs", "list", "--artifacts-dir", dir)
	if err != nil {
		t.Fatalf("runs list: %v\n%s", err, out)
	}
	golden(t, "runs_list", dir, out)

	out, err = cli(t, "", "runs", "show", "--artifacts-dir", dir, "r_7c")
	if err != nil {
		t.Fatalf("runs show: %v\n%s", err, out)
	}
	golden(t, "runs_show_timed_out", dir, out)

	// An artifact edited after the fact is reported, and fails the command.
	p := filepath.Join(dir, names[0])
	data, _ := os.ReadFile(p)
	if err := os.WriteFile(p, []byte(strings.Replace(string(data), `"stdout": "3\n"`, `"stdout": "4\n"`, 1)), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err = cli(t, "", "runs", "show", "--artifacts-dir", dir, "r_0b5e")
	var code exitError
	if !errors.As(err, &code) || code != 1 {
		t.Errorf("runs show of an edited artifact = %v, want exit status 1", err)
	}
	golden(t, "runs_show_altered", dir, out)
	if out, err := cli(t, "", "runs", "show", "--artifacts-dir", dir, "r_nope"); err == nil || !strings.Contains(err.Error(), "no artifact of that run") {
		t.Errorf("runs show of an unknown run = %v\n%s", err, out)
	}
}
