package artifacts

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

var when = time.Date(2026, 11, 21, 15, 2, 11, 520_000_000, time.UTC)

func sampleRun(reason runner.ExitReason, exit int) Run {
	return Run{
		RunID: "r_1", QueryID: "q_1", ToolUseID: "toolu_1", Client: "agent", PolicyHash: "sha256:ab", Language: "python",
		Code: "print(1)", Files: map[string]string{"z.csv": "a,b\n", "a.bin": "\x00\xff"},
		Report: wire.NewRunReport(runner.Result{RunID: "r_1", Reason: reason, ExitCode: exit, Stdout: "1\n",
			Files: []runner.File{{Path: "out.png", Size: 3, SHA256: "cd", Change: runner.FileCreated, MediaType: "image/png", Content: []byte("PNG")}}}),
	}
}

func TestNewKeepsTheCodeAsStoreCodeSays(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		store  StoreCode
		reason runner.ExitReason
		exit   int
		kept   bool
	}{
		{"never keeps no code, even of a failed run", Never, runner.Exited, 1, false},
		{"on_error keeps the code of a run that exited non-zero", OnError, runner.Exited, 1, true},
		{"on_error keeps the code of a run that timed out", OnError, runner.TimedOut, 137, true},
		{"on_error keeps no code of a run that exited 0", OnError, runner.Exited, 0, false},
		{"always keeps the code", Always, runner.Exited, 0, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			a := New(sampleRun(tc.reason, tc.exit), when, tc.store)
			if (a.Code != "") != tc.kept || a.CodeSHA256 != Digest([]byte("print(1)")) {
				t.Errorf("code %q (sha %s), want kept=%v and the digest always", a.Code, a.CodeSHA256, tc.kept)
			}
		})
	}
	a := New(sampleRun(runner.Exited, 0), when, Never)
	if len(a.Files) != 2 || a.Files[0].Path != "a.bin" || a.Files[0].SHA256 != Digest([]byte("\x00\xff")) || a.Files[1].Size != 4 {
		t.Errorf("input files %+v, want a.bin then z.csv with their sizes and digests", a.Files)
	}
	if f := a.Result.Files[0]; f.Base64 != nil || f.Text != nil || f.SHA256 != "cd" || f.Omitted == "" {
		t.Errorf("returned file %+v, want its digest without its content", f)
	}
}

func TestWriteListFind(t *testing.T) {
	t.Parallel()
	d, err := Open(filepath.Join(t.TempDir(), "artifacts"))
	if err != nil {
		t.Fatal(err)
	}
	first := New(sampleRun(runner.Exited, 0), when, Always)
	second := New(sampleRun(runner.Exited, 0), when.Add(time.Second), Always)
	second.RunID = "r_2"
	name, sum, err := d.Write(first)
	if err != nil {
		t.Fatal(err)
	}
	if want := "20261121T150211.520000000Z-" + sum[:16] + ".json"; name != want || len(sum) != 64 {
		t.Errorf("name %s, sum %s; want %s and a whole SHA-256", name, sum, want)
	}
	data, _ := os.ReadFile(filepath.Join(d.Path(), name))
	if Digest(data) != sum {
		t.Error("the returned sum is not the SHA-256 of the file's content")
	}
	if fi, _ := os.Stat(filepath.Join(d.Path(), name)); fi.Mode().Perm() != 0o600 {
		t.Errorf("artifact mode %o, want 600: it holds code and output", fi.Mode().Perm())
	}
	if _, _, err := d.Write(second); err != nil {
		t.Fatal(err)
	}
	all, err := d.List()
	if err != nil || len(all) != 2 || all[0].RunID != "r_1" || all[1].RunID != "r_2" || !all[0].Intact {
		t.Fatalf("List = %+v, %v; want r_1 then r_2, intact", all, err)
	}
	if e, err := d.Find("r_2"); err != nil || e.RunID != "r_2" {
		t.Errorf("Find(r_2) = %+v, %v", e, err)
	}
	if _, err := d.Find("r_"); err == nil || !strings.Contains(err.Error(), "2 runs start with r_") {
		t.Errorf("Find of an ambiguous prefix = %v", err)
	}
	if _, err := d.Find("r_9"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Find of an unknown run = %v, want ErrNotFound", err)
	}
	// An edited artifact no longer matches its name.
	p := filepath.Join(d.Path(), name)
	edited := strings.Replace(string(data), `"exit_code": 0`, `"exit_code": 1`, 1)
	if edited == string(data) {
		t.Fatal("the test's edit changed nothing")
	}
	if err := os.WriteFile(p, []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	if e, err := d.Find("r_1"); err != nil || e.Intact {
		t.Errorf("Find after an edit = intact %v, %v; want not intact", e.Intact, err)
	}
}

func TestParseStoreCode(t *testing.T) {
	t.Parallel()
	for _, s := range []string{"never", "on_error", "always"} {
		if c, err := ParseStoreCode(s); err != nil || string(c) != s {
			t.Errorf("ParseStoreCode(%q) = %q, %v", s, c, err)
		}
	}
	if _, err := ParseStoreCode("sometimes"); err == nil {
		t.Error("ParseStoreCode(sometimes) accepted")
	}
}
