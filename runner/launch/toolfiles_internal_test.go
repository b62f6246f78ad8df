package launch

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// initTools runs init's own unpacking of the wrapper files (initBridge's
// sub tools, with init's fail) on pack in a fresh directory, as init runs
// it in the sandbox, and returns the directory and what it wrote to
// stderr; ok is false when it failed.
func initTools(t *testing.T, pack []byte) (dir, stderr string, ok bool) {
	t.Helper()
	perl, err := exec.LookPath("perl")
	if err != nil {
		t.Fatalf("perl, which init is, is not installed: %v", err)
	}
	sub := regexp.MustCompile(`(?s)\nsub tools \{.*?\n\}\n`).FindString(initBridge)
	fail := regexp.MustCompile(`(?m)^sub fail \{.*\}$`).FindString(initProgram)
	if sub == "" || fail == "" {
		t.Fatal("init has no sub tools or sub fail")
	}
	dir = filepath.Join(t.TempDir(), "tools")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), perl, "-e", fail+sub+`local $/; my $p = <STDIN>; tools($ARGV[0], $p);`, dir)
	cmd.Stdin = bytes.NewReader(pack)
	var errOut bytes.Buffer
	cmd.Stderr = &errOut
	err = cmd.Run()
	return dir, errOut.String(), err == nil
}

// TestInitUnpacksToolsAsPacked: what toolsPack writes, init unpacks to
// the same bytes, files 0444 in directories 0555.
func TestInitUnpacksToolsAsPacked(t *testing.T) {
	t.Parallel()
	files := map[string][]byte{
		"python/gatekeeper_tools/__init__.py": []byte("x = 1\n"),
		"python/gatekeeper_tools/crm.py":      []byte("F 3 ../evil\nabc\n"), // content that looks like an entry stays content
		"node/gatekeeper-tools/@scope+x.d.ts": {},
	}
	pack, err := toolsPack(files)
	if err != nil {
		t.Fatal(err)
	}
	dir, stderr, ok := initTools(t, pack)
	if !ok {
		t.Fatalf("init refused toolsPack's own output: %s", stderr)
	}
	for name, want := range files {
		p := filepath.Join(dir, name)
		got, err := os.ReadFile(p)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("%s: %q, %v; want %q", name, got, err, want)
		}
		if st, err := os.Stat(p); err != nil || st.Mode().Perm() != 0o444 {
			t.Errorf("%s: mode %v, %v; want 0444", name, st.Mode().Perm(), err)
		}
		if st, err := os.Stat(filepath.Dir(p)); err != nil || st.Mode().Perm() != 0o555 {
			t.Errorf("%s's directory: mode %v, %v; want 0555", name, st.Mode().Perm(), err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "..", "evil")); err == nil {
		t.Error("a file's content was taken for an entry")
	}
}

// TestInitRefusesHostileToolFiles: init checks the wrapper files again,
// so input that toolsPack never writes (a path out of the directory, a
// dot name, a file over one already there, a short file, a directory
// with a size) fails the run and writes nothing outside the directory.
func TestInitRefusesHostileToolFiles(t *testing.T) {
	t.Parallel()
	for _, c := range []struct{ name, pack string }{
		{"a path up and out", "F 3 ../evil\nabc"},
		{"a path that climbs in its middle", "D a\nF 3 a/../../evil\nabc"},
		{"an absolute path", "F 3 /tmp/evil\nabc"},
		{"a dot name", "F 3 .pth\nabc"},
		{"a dot directory", "D .x\n"},
		{"a file over one already there", "F 1 a\naF 1 a\nb"},
		{"a file through a directory not made", "F 1 nodir/a\na"},
		{"a file shorter than its size", "F 5 a\nab"},
		{"a directory with a size", "D 3 a\n"},
		{"an unknown entry", "L 3 a\nabc"},
		{"a path with a newline's neighbour", "F 1 a\rb\na"},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dir, stderr, ok := initTools(t, []byte(c.pack))
			if ok || !strings.HasPrefix(stderr, "gatekeeper: ") {
				t.Errorf("init took %q: ok %v, stderr %q; want it to fail with a gatekeeper: line", c.pack, ok, stderr)
			}
			if _, err := os.Stat(filepath.Join(filepath.Dir(dir), "evil")); err == nil {
				t.Errorf("init wrote outside its directory")
			}
		})
	}
}
