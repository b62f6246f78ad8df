// Package goldenfile writes the golden files that tests compare their output
// with, for a run given -update.
package goldenfile

import (
	"os"
	"path/filepath"
	"testing"
)

// Write stores got at path (making its directory) and logs that it did.
// Under CI=true it fails the test instead and writes nothing: a golden file
// rewritten from the output would be compared with the output itself and
// prove nothing. The caller compares nothing after Write; the rewritten
// file is reviewed with git diff.
func Write(t testing.TB, path string, got []byte) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("-update is refused under CI=true: it would rewrite %s from the output and compare the output with itself", path)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, got, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("-update: rewrote %s (not compared this run; review it with git diff)", path)
}
