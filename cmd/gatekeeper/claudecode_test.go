package main

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var code exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &code):
		return int(code)
	}
	return 1
}

// TestHookCommandDeniesOnEveryFailure: the command hook exits 2 (a block
// for the CLI, even without onFailure) whatever goes wrong, flags included.
func TestHookCommandDeniesOnEveryFailure(t *testing.T) {
	dir := t.TempDir()
	token := filepath.Join(dir, "token")
	if err := os.WriteFile(token, []byte("tok\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	input := `{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"Bash","tool_input":{},"tool_use_id":"t"}`
	tests := []struct {
		name    string
		args    []string
		wantErr string
	}{
		{"an unknown flag", []string{"hook", "--nope"}, "cannot start"},
		{"a bad timeout", []string{"hook", "--timeout", "soon"}, "cannot start"},
		{"a bad address", []string{"hook", "--url", "ftp://x", "--token-file", token}, "cannot start"},
		{"no token", []string{"hook", "--url", "unix://" + filepath.Join(dir, "gk.sock")}, "no token"},
		{"a sidecar that is not there", []string{"hook", "--url", "unix://" + filepath.Join(dir, "gk.sock"), "--token-file", token}, "gk.sock"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GATEKEEPER_TOKEN", "")
			out, err := cli(t, input, tc.args...)
			if code := exitCode(t, err); code != 2 || !strings.Contains(out, tc.wantErr) || !strings.Contains(out, "so this tool call is denied [gatekeeper rule: client.gatekeeper_unavailable]") {
				t.Errorf("exit %d, output %q; want 2 and a deny naming %q", code, out, tc.wantErr)
			}
		})
	}
}

func TestClaudeCodeInstallPrintsAndRoundTrips(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	managed := filepath.Join(dir, "claude-code")
	args := []string{"--path", managed, "--url", "unix:///run/gk.sock", "--token-file", "/etc/gatekeeper/token", "--gatekeeper", "/usr/bin/env"}
	out, err := cli(t, "", append([]string{"claude-code", "install", "--print"}, args...)...)
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "claude_code_install_print", dir, out)
	if _, err := os.Stat(managed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("--print wrote %s: %v", managed, err)
	}
	if out, err := cli(t, "", append([]string{"claude-code", "install"}, args...)...); err != nil || !strings.Contains(out, "+++ b"+managed+"/managed-settings.json") {
		t.Fatalf("install: %v\n%s", err, out)
	}
	if out, err := cli(t, "", "claude-code", "uninstall", "--path", managed); err != nil || !strings.Contains(out, "as they were before") {
		t.Fatalf("uninstall: %v\n%s", err, out)
	}
	if _, err := os.Stat(managed); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("after uninstall %s exists: %v", managed, err)
	}
	if err := os.MkdirAll(managed, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(managed, "managed-settings.json"), []byte("{\"model\":\"mine\"}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err = cli(t, "", append([]string{"claude-code", "install"}, args...)...)
	if err == nil || !strings.Contains(out, "holds settings gatekeeper did not write") || !strings.Contains(out, `-{"model":"mine"}`) || !strings.Contains(err.Error(), "--force") {
		t.Fatalf("install over foreign settings: %v\n%s", err, out)
	}
}

// TestClaudeCodeInstallChecksTheBinary: install refuses a binary another
// user can replace and says why; --force installs it with a warning that
// says why; --check reports it on the installation.
func TestClaudeCodeInstallChecksTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bin := filepath.Join(dir, "home", "u", "gatekeeper")
	if err := os.MkdirAll(filepath.Dir(bin), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() == 0 {
		if err := os.Chown(bin, 65534, 65534); err != nil {
			t.Fatal(err)
		}
	}
	managed := filepath.Join(dir, "claude-code")
	args := []string{"claude-code", "install", "--path", managed, "--url", "unix:///run/gk.sock", "--token-file", "/etc/gatekeeper/token", "--gatekeeper", bin}
	out, err := cli(t, "", args...)
	if err == nil || !strings.Contains(err.Error(), "not safe to run as root") || !strings.Contains(err.Error(), "--copy-binary") {
		t.Fatalf("install of a user's binary: %v\n%s", err, out)
	}
	if _, err := os.Stat(managed); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("a refused install wrote %s", managed)
	}
	out, err = cli(t, "", append(args, "--force")...)
	if err != nil || !strings.Contains(out, "warning: installing anyway (--force)") || !strings.Contains(out, "whoever can replace it can turn gatekeeper off") {
		t.Fatalf("install --force: %v\n%s", err, out)
	}
	out, err = cli(t, "", "claude-code", "install", "--check", "--path", managed)
	if err == nil || !strings.Contains(out, "binary "+bin+": ") || !strings.Contains(out, "managed-settings.json: as gatekeeper wrote it") {
		t.Fatalf("install --check of a forced install: %v\n%s", err, out)
	}
	if os.Geteuid() == 0 && !strings.Contains(out, "owned by uid 65534, not root") {
		t.Errorf("--check does not say who owns the binary:\n%s", out)
	}
	if _, err := cli(t, "", "claude-code", "uninstall", "--path", managed); err != nil {
		t.Fatal(err)
	}
	out, err = cli(t, "", "claude-code", "install", "--check", "--path", managed)
	if err == nil || !strings.Contains(out, "no record of a gatekeeper install") {
		t.Fatalf("--check with nothing installed: %v\n%s", err, out)
	}
}
