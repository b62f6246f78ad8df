package claudecode

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestShellToolsMatchTheSharedList pins ShellTools to
// testdata/shell-tools.json, which @gatekeeper/client's
// declarations.test.ts pins SHELL_TOOLS to: a shell tool the CLI's
// installer denies and the SDK client leaves without an ask rule (or the
// other way round) would run a skill's `!` lines on the host in one client
// only.
func TestShellToolsMatchTheSharedList(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "shell-tools.json"))
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	if err := json.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if got := ShellTools(); !slices.Equal(got, want) {
		t.Errorf("ShellTools() = %v; testdata/shell-tools.json lists %v", got, want)
	}
}
