package goldenfile

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// recorder is a testing.TB that keeps what Fatalf says instead of ending
// the test, so Write's refusal can be checked.
type recorder struct {
	testing.TB
	fatal []string
}

func (r *recorder) Helper()                   {}
func (r *recorder) Logf(string, ...any)       {}
func (r *recorder) Fatal(args ...any)         { r.fatal = append(r.fatal, fmt.Sprint(args...)) }
func (r *recorder) Fatalf(f string, a ...any) { r.fatal = append(r.fatal, fmt.Sprintf(f, a...)) }

func TestWriteIsRefusedUnderCI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g", "x.golden")
	t.Setenv("CI", "true")
	r := &recorder{TB: t}
	Write(r, path, []byte("got"))
	if len(r.fatal) != 1 || !strings.Contains(r.fatal[0], "refused under CI=true") {
		t.Fatalf("Write under CI=true failed the test with %q, want one refusal", r.fatal)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("a refused Write left %s: %v", path, err)
	}
}

func TestWriteWritesOutsideCI(t *testing.T) {
	path := filepath.Join(t.TempDir(), "g", "x.golden")
	t.Setenv("CI", "")
	r := &recorder{TB: t}
	Write(r, path, []byte("got"))
	if len(r.fatal) != 0 {
		t.Fatalf("Write failed the test: %q", r.fatal)
	}
	if b, err := os.ReadFile(path); err != nil || string(b) != "got" {
		t.Fatalf("%s holds %q, %v; want what was given", path, b, err)
	}
}
