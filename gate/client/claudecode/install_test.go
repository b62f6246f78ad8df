package claudecode

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/goldenfile"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

// installable is options naming a binary that passes SecurePath on any
// machine: /usr/bin/env, root's, in root's directories.
func installable(dir string) InstallOptions {
	o := options(dir)
	o.Gatekeeper = "/usr/bin/env"
	return o
}

func options(dir string) InstallOptions {
	return InstallOptions{Dir: dir, Hook: HookCommand, Gatekeeper: "/usr/local/bin/gatekeeper", Sidecar: "unix:///run/gatekeeper/gk.sock",
		TokenFile: "/etc/gatekeeper/token", HookURL: "http://127.0.0.1:7778/v1/claude-code/hook", HookTimeout: 30}
}

// golden compares got with testdata/<name>.golden, or writes it with -update.
func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		goldenfile.Write(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./gate/client/claudecode -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from %s:\n%s", name, path, unifiedDiff(path, want, got))
	}
}

func TestFilesLockTheCLIToGatekeeper(t *testing.T) {
	t.Parallel()
	for _, hook := range []string{HookCommand, HookHTTP} {
		t.Run(hook, func(t *testing.T) {
			t.Parallel()
			o := options("/etc/claude-code")
			o.Hook = hook
			files, err := Files(o)
			if err != nil {
				t.Fatal(err)
			}
			var s struct {
				AllowManagedHooksOnly           bool
				AllowManagedPermissionRulesOnly bool
				AllowManagedMcpServersOnly      bool
				AllowedMcpServers               []string
				Permissions                     struct{ Deny []string }
				Hooks                           map[string][]struct {
					Matcher string
					Hooks   []map[string]any
				}
				AllowedHttpHookUrls    []string
				HttpHookAllowedEnvVars []string
			}
			if err := json.Unmarshal(files[SettingsFile], &s); err != nil {
				t.Fatal(err)
			}
			if !s.AllowManagedHooksOnly || !s.AllowManagedPermissionRulesOnly || !s.AllowManagedMcpServersOnly || s.AllowedMcpServers == nil || len(s.AllowedMcpServers) != 0 {
				t.Errorf("the locks are not all set: %+v", s)
			}
			if !strings.Contains(strings.Join(s.Permissions.Deny, ","), "Bash") {
				t.Errorf("Bash is not denied: %v", s.Permissions.Deny)
			}
			// Exactly the events gatekeeper acts on are hooked.
			var acted []string
			for ev, h := range wire.HookEvents() {
				if h != wire.HandleNone {
					acted = append(acted, ev)
				}
			}
			if got := slices.Sorted(maps.Keys(s.Hooks)); !slices.Equal(got, slices.Sorted(slices.Values(acted))) {
				t.Errorf("hooked events %v, want %v", got, slices.Sorted(slices.Values(acted)))
			}
			for _, ev := range []string{"PreToolUse", "PermissionRequest", "PostToolUse", "PostToolUseFailure", "SessionEnd", "Elicitation", "ConfigChange"} {
				m := s.Hooks[ev]
				if len(m) != 1 || len(m[0].Hooks) != 1 || m[0].Hooks[0]["type"] != hook || m[0].Hooks[0]["onFailure"] != "block" {
					t.Errorf("%s: %+v, want one %s hook with onFailure block", ev, m, hook)
				}
				want := map[string]string{"PreToolUse": "*", "PermissionRequest": "*", "PostToolUse": "*", "PostToolUseFailure": "*"}[ev]
				if len(m) == 1 && m[0].Matcher != want {
					t.Errorf("%s matches %q, want %q (every tool, or no matcher for an event without tools)", ev, m[0].Matcher, want)
				}
			}
			if (hook == HookHTTP) != (len(s.AllowedHttpHookUrls) == 1 && len(s.HttpHookAllowedEnvVars) == 1) {
				t.Errorf("HTTP allowlists %v %v for a %s hook", s.AllowedHttpHookUrls, s.HttpHookAllowedEnvVars, hook)
			}
			golden(t, "install_"+hook+"_"+strings.TrimSuffix(SettingsFile, ".json"), files[SettingsFile])
			golden(t, "install_"+hook+"_"+strings.TrimSuffix(MCPFile, ".json"), files[MCPFile])
		})
	}
}

func TestFilesRefuseBadOptions(t *testing.T) {
	t.Parallel()
	o := InstallOptions{Dir: "rel", Hook: "ftp", Gatekeeper: "gatekeeper", TokenFile: "token", HookTimeout: 1}
	_, err := Files(o)
	if err == nil {
		t.Fatal("Files accepted relative paths, an unknown hook kind and a 1 s timeout")
	}
	for _, want := range []string{`"rel"`, `"gatekeeper"`, `"token"`, "no sidecar address", `"ftp"`, "1 s"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("the error does not name %s: %v", want, err)
		}
	}
	o = options("/etc/claude-code")
	o.Hook, o.HookURL = HookHTTP, ""
	if _, err := Files(o); err == nil || !strings.Contains(err.Error(), "hook URL") {
		t.Errorf("an HTTP hook without its URL: %v", err)
	}
}

// snapshot reads every file of dir (name → content and mode); nil when dir
// does not exist.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, e := range entries {
		fi, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		data, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		out[e.Name()] = fi.Mode().Perm().String() + " " + string(data)
	}
	return out
}

func equalSnapshots(a, b map[string]string) bool {
	if (a == nil) != (b == nil) || len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestInstallThenUninstallRestoresExactly(t *testing.T) {
	t.Parallel()
	foreign := []byte("{\n  \"model\": \"x\"   \n}") // odd spacing, no final newline
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		// force is needed because the directory holds foreign settings.
		force bool
	}{
		{name: "a directory that did not exist is removed again", prepare: func(*testing.T, string) {}},
		{name: "an empty directory stays, empty", prepare: func(t *testing.T, dir string) { must(t, os.Mkdir(dir, 0o755)) }},
		{name: "foreign settings come back byte for byte with their mode", force: true, prepare: func(t *testing.T, dir string) {
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.WriteFile(filepath.Join(dir, SettingsFile), foreign, 0o640))
			must(t, os.WriteFile(filepath.Join(dir, "other.json"), []byte("keep"), 0o600))
		}},
		{name: "a foreign managed-mcp.json comes back and an empty settings file too", force: true, prepare: func(t *testing.T, dir string) {
			must(t, os.Mkdir(dir, 0o755))
			must(t, os.WriteFile(filepath.Join(dir, MCPFile), []byte(`{"mcpServers":{}}`), 0o644))
			must(t, os.WriteFile(filepath.Join(dir, SettingsFile), nil, 0o644))
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := filepath.Join(t.TempDir(), "claude-code")
			tc.prepare(t, dir)
			before := snapshot(t, dir)
			if tc.force {
				if _, err := Install(installable(dir), false); !errors.Is(err, ErrNotOurs) {
					t.Fatalf("Install over foreign settings without force: %v, want ErrNotOurs", err)
				}
				if got := snapshot(t, dir); !equalSnapshots(got, before) {
					t.Fatalf("a refused install changed the directory: %v", got)
				}
			}
			changes, err := Install(installable(dir), tc.force)
			if err != nil {
				t.Fatal(err)
			}
			if len(changes) != 2 {
				t.Errorf("install reported %d changes, want 2", len(changes))
			}
			files, _ := Files(installable(dir))
			for name, want := range files {
				got, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil || !bytes.Equal(got, want) {
					t.Errorf("%s after install: %q %v", name, got, err)
				}
			}
			// Installing again (with other options) is an update, not foreign.
			o := installable(dir)
			o.Hook = HookHTTP
			if _, err := Install(o, false); err != nil {
				t.Fatalf("a second install: %v", err)
			}
			if _, err := Uninstall(dir, false); err != nil {
				t.Fatal(err)
			}
			if got := snapshot(t, dir); !equalSnapshots(got, before) {
				t.Errorf("after uninstall the directory is %v, want %v", got, before)
			}
		})
	}
}

func TestUninstallRefusesWhatChangedSinceInstall(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "claude-code")
	if _, err := Uninstall(dir, false); err == nil || !strings.Contains(err.Error(), "has not installed") {
		t.Fatalf("uninstall with nothing installed: %v", err)
	}
	if _, err := Install(installable(dir), false); err != nil {
		t.Fatal(err)
	}
	edited := filepath.Join(dir, SettingsFile)
	must(t, os.WriteFile(edited, []byte(`{"edited":true}`), 0o644))
	if _, err := Install(installable(dir), false); !errors.Is(err, ErrNotOurs) {
		t.Fatalf("install over a file edited since: %v, want ErrNotOurs", err)
	}
	changes, err := Uninstall(dir, false)
	if !errors.Is(err, ErrNotOurs) {
		t.Fatalf("uninstall of an edited file: %v, want ErrNotOurs", err)
	}
	if len(changes) != 2 || !strings.Contains(changes[1].Diff()+changes[0].Diff(), `-{"edited":true}`) {
		t.Errorf("the refusal does not show the edit: %+v", changes)
	}
	if data, _ := os.ReadFile(edited); string(data) != `{"edited":true}` {
		t.Fatalf("a refused uninstall touched the file: %s", data)
	}
	if _, err := Uninstall(dir, true); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the directory install created is still there: %v", err)
	}
}

func TestDiffShowsEveryLine(t *testing.T) {
	t.Parallel()
	got := unifiedDiff("/etc/x", []byte("a\nb\nc\n"), []byte("a\nc\nd\n"))
	want := "--- a/etc/x\n+++ b/etc/x\n@@ -1,3 +1,3 @@\n a\n-b\n c\n+d\n"
	if got != want {
		t.Errorf("diff:\n%s\nwant:\n%s", got, want)
	}
	if got := unifiedDiff("/etc/x", nil, []byte("n\n")); got != "--- /dev/null\n+++ b/etc/x\n@@ -0,0 +1,1 @@\n+n\n" {
		t.Errorf("diff of a new file:\n%s", got)
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// TestInstalledPathsOfARealInstall: what Install writes names the binary
// and the token file, both in the command hook and in the MCP server, and
// InstalledPaths finds them in each file alone.
func TestInstalledPathsOfARealInstall(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "managed")
	o := installable(dir)
	if _, err := Install(o, true); err != nil {
		t.Fatal(err)
	}
	want := []string{o.TokenFile, o.Gatekeeper}
	if got, err := InstalledPaths(dir); err != nil || !slices.Equal(got, want) {
		t.Fatalf("InstalledPaths = %q, %v; want %q", got, err, want)
	}
	for _, only := range []string{SettingsFile, MCPFile} {
		one := t.TempDir()
		data, err := os.ReadFile(filepath.Join(dir, only))
		must(t, err)
		must(t, os.WriteFile(filepath.Join(one, only), data, 0o644))
		if got, err := InstalledPaths(one); err != nil || !slices.Equal(got, want) {
			t.Errorf("InstalledPaths of %s alone = %q, %v; want %q", only, got, err, want)
		}
	}
}
