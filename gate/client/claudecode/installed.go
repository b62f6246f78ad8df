package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// InstalledPaths returns the absolute paths that Claude Code's managed
// settings in dir make the CLI run or read for gatekeeper: the command of
// every command hook and of every stdio MCP server, and the file after
// each --token-file in their arguments. The sidecar write-protects them in
// every policy (gate.Config.Protect), so that a model cannot replace the
// hook that gates it. Missing files give none; a file that is there but
// cannot be read or is not a JSON object is an error.
func InstalledPaths(dir string) ([]string, error) {
	var paths []string
	add := func(command string, args []string) {
		if filepath.IsAbs(command) {
			paths = append(paths, filepath.Clean(command))
		}
		for i, a := range args {
			if a == "--token-file" && i+1 < len(args) && filepath.IsAbs(args[i+1]) {
				paths = append(paths, filepath.Clean(args[i+1]))
			}
		}
	}
	var settings struct {
		Hooks map[string][]struct {
			Hooks []struct {
				Type    string   `json:"type"`
				Command string   `json:"command"`
				Args    []string `json:"args"`
			} `json:"hooks"`
		} `json:"hooks"`
	}
	if err := readJSON(filepath.Join(dir, SettingsFile), &settings); err != nil {
		return nil, err
	}
	for _, matchers := range settings.Hooks {
		for _, m := range matchers {
			for _, h := range m.Hooks {
				if h.Type == "command" {
					add(h.Command, h.Args)
				}
			}
		}
	}
	var mcp struct {
		MCPServers map[string]struct {
			Command string   `json:"command"`
			Args    []string `json:"args"`
		} `json:"mcpServers"`
	}
	if err := readJSON(filepath.Join(dir, MCPFile), &mcp); err != nil {
		return nil, err
	}
	for _, s := range mcp.MCPServers {
		add(s.Command, s.Args)
	}
	slices.Sort(paths)
	return slices.Compact(paths), nil
}

// readJSON decodes the JSON object in path into v; a missing file leaves v
// as it is.
func readJSON(path string, v any) error {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("read Claude Code's managed settings: %w", err)
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("read Claude Code's managed settings %s: %w", path, err)
	}
	return nil
}

// CheckReport is what Check found of an installation.
type CheckReport struct {
	// Lines say what was checked, one finding each.
	Lines []string
	// Problems are the findings that leave the CLI not under gatekeeper,
	// or under a gate someone other than root can replace.
	Problems []string
}

// Check reports on the installation in dir: whether the settings files are
// there and as install wrote them, and whether each binary they name passes
// SecurePath (the files they name besides, such as the token file, are
// listed with what SecurePath says of them, but a token file owned by the
// user who runs the CLI is expected).
func Check(dir string) CheckReport {
	var r CheckReport
	note := func(problem bool, format string, a ...any) {
		s := fmt.Sprintf(format, a...)
		r.Lines = append(r.Lines, s)
		if problem {
			r.Problems = append(r.Problems, s)
		}
	}
	st, err := readState(dir)
	if err != nil || st == nil {
		note(true, "%s: no record of a gatekeeper install (%v)", dir, err)
	}
	for _, name := range []string{SettingsFile, MCPFile} {
		path := filepath.Join(dir, name)
		data, _, err := readFile(path)
		switch {
		case err != nil:
			note(true, "%s: %v", path, err)
		case data == nil:
			note(true, "%s: missing", path)
		case st == nil || st.Files[name] == nil || digest.SHA256(data) != st.Files[name].Written:
			note(true, "%s: changed since gatekeeper wrote it", path)
		default:
			note(false, "%s: as gatekeeper wrote it", path)
		}
	}
	if problems := SecureDir(dir); len(problems) > 0 {
		note(true, "%s: %s", dir, strings.Join(problems, "; "))
	}
	paths, err := InstalledPaths(dir)
	if err != nil {
		note(true, "%v", err)
	}
	binaries := map[string]bool{}
	var settings struct {
		Hooks map[string][]struct {
			Hooks []struct{ Command string } `json:"hooks"`
		} `json:"hooks"`
	}
	_ = readJSON(filepath.Join(dir, SettingsFile), &settings)
	for _, ms := range settings.Hooks {
		for _, m := range ms {
			for _, h := range m.Hooks {
				binaries[filepath.Clean(h.Command)] = true
			}
		}
	}
	var mcp struct {
		MCPServers map[string]struct{ Command string } `json:"mcpServers"`
	}
	_ = readJSON(filepath.Join(dir, MCPFile), &mcp)
	for _, s := range mcp.MCPServers {
		binaries[filepath.Clean(s.Command)] = true
	}
	for _, p := range paths {
		problems := SecurePath(p)
		kind := "file"
		if binaries[p] {
			kind = "binary"
		}
		switch {
		case len(problems) == 0:
			note(false, "%s %s: owned by root, writable only by root; the sidecar write-protects it", kind, p)
		case binaries[p]:
			note(true, "%s %s: %s", kind, p, strings.Join(problems, "; "))
		default:
			note(false, "%s %s: the sidecar write-protects it; %s", kind, p, strings.Join(problems, "; "))
		}
	}
	return r
}
