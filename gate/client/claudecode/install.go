package claudecode

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
)

// The files install writes into the managed settings directory, and the
// record it keeps there of what it wrote and what was there before.
const (
	SettingsFile = "managed-settings.json"
	MCPFile      = "managed-mcp.json"
	stateFile    = ".gatekeeper-install.json"
	// BinaryFile is the copy of the gatekeeper binary install makes in the
	// managed settings directory with InstallOptions.CopyFrom.
	BinaryFile = "gatekeeper"
)

// Hook kinds install can wire.
const (
	HookCommand = "command"
	HookHTTP    = "http"
)

// TokenEnv is the environment variable an HTTP hook's Authorization header
// reads the token from.
const TokenEnv = "GATEKEEPER_TOKEN"

// ErrNotOurs means a file install would overwrite (or uninstall would
// restore over) holds settings gatekeeper did not write; --force overrides.
var ErrNotOurs = errors.New("settings gatekeeper did not write")

// ErrInsecure means the gatekeeper binary the settings would name is not
// safe for root's CLI to run (SecurePath); --force overrides.
var ErrInsecure = errors.New("the gatekeeper binary is not safe to run as root")

// DefaultManagedDir is the CLI's managed settings directory on this OS,
// as its settings documentation and the pinned binary name it.
func DefaultManagedDir() string {
	switch runtime.GOOS {
	case "darwin":
		return "/Library/Application Support/ClaudeCode"
	case "windows":
		return `C:\Program Files\ClaudeCode`
	}
	return "/etc/claude-code"
}

// InstallOptions say how the CLI reaches gatekeeper.
type InstallOptions struct {
	// Dir is the managed settings directory.
	Dir string
	// Hook is HookCommand (the CLI runs `gatekeeper hook` per call) or
	// HookHTTP (the CLI POSTs to HookURL).
	Hook string
	// Gatekeeper is the absolute path of the gatekeeper binary that the
	// command hook and the MCP server run.
	Gatekeeper string
	// Sidecar is the address the command hook and `gatekeeper mcp` use:
	// the sidecar's socket (unix:///…) or a TCP address.
	Sidecar string
	// TokenFile is the token file they read; it must be readable by every
	// user who runs the CLI.
	TokenFile string
	// HookURL is the HTTP hook's URL, the sidecar's --hook-listen address
	// with the hook path.
	HookURL string
	// HookTimeout is how long the CLI waits for one hook call, in seconds;
	// then onFailure "block" blocks the call.
	HookTimeout int
	// CopyFrom, when set, is a gatekeeper binary that Install copies into
	// Dir as BinaryFile (mode 0755, owned by the installing user) and names
	// instead of Gatekeeper; Uninstall removes the copy.
	CopyFrom string
}

// Files returns the managed settings files for o, by name.
//
// managed-settings.json puts a hook on every tool call (PreToolUse, and
// PermissionRequest where the CLI would prompt), on its end (PostToolUse,
// PostToolUseFailure), on SessionEnd, and on the events gatekeeper refuses
// (Elicitation, ConfigChange), all with onFailure "block", and locks the CLI so no other settings file can
// change that: allowManagedHooksOnly (user and project hooks do not run),
// allowManagedPermissionRulesOnly (their permissions.allow rules are
// ignored), allowManagedMcpServersOnly with an empty allowedMcpServers
// (their MCP servers do not start); for HTTP hooks the URL and the token
// variable are allowlisted too. managed-mcp.json defines the one MCP server
// the CLI may start, sandboxed_code, which is `gatekeeper mcp`, always
// loaded. docs/CLAUDE-CODE.md cites the CLI's documentation for each key.
func Files(o InstallOptions) (map[string][]byte, error) {
	if err := o.validate(); err != nil {
		return nil, err
	}
	var hook map[string]any
	switch o.Hook {
	case HookCommand:
		hook = map[string]any{
			"type": "command", "command": o.Gatekeeper,
			"args":    []string{"hook", "--url", o.Sidecar, "--token-file", o.TokenFile, "--timeout", strconv.Itoa(o.HookTimeout-2) + "s"},
			"timeout": o.HookTimeout, "onFailure": "block",
		}
	case HookHTTP:
		hook = map[string]any{
			"type": "http", "url": o.HookURL,
			"headers":        map[string]string{"Authorization": "Bearer ${" + TokenEnv + "}"},
			"allowedEnvVars": []string{TokenEnv},
			"timeout":        o.HookTimeout, "onFailure": "block",
		}
	}
	// Every event gatekeeper acts on (wire.HookEvents) goes to the same
	// hook; the tool events on every tool.
	hooks := map[string]any{}
	for ev, h := range wire.HookEvents() {
		switch h {
		case wire.HandleDecide, wire.HandleRecord:
			hooks[ev] = []any{map[string]any{"matcher": "*", "hooks": []any{hook}}}
		case wire.HandleClose, wire.HandleRefuse:
			hooks[ev] = []any{map[string]any{"hooks": []any{hook}}}
		}
	}
	settings := map[string]any{
		"allowManagedHooksOnly":           true,
		"allowManagedPermissionRulesOnly": true,
		"allowManagedMcpServersOnly":      true,
		"allowedMcpServers":               []string{},
		"permissions":                     map[string]any{"deny": ShellTools()},
		"hooks":                           hooks,
	}
	if o.Hook == HookHTTP {
		settings["allowedHttpHookUrls"] = []string{o.HookURL}
		settings["httpHookAllowedEnvVars"] = []string{TokenEnv}
	}
	mcp := map[string]any{"mcpServers": map[string]any{
		wire.SandboxServer: map[string]any{
			"type": "stdio", "command": o.Gatekeeper,
			"args":       []string{"mcp", "--url", o.Sidecar, "--token-file", o.TokenFile},
			"alwaysLoad": true,
		},
	}}
	out := map[string][]byte{}
	for name, v := range map[string]any{SettingsFile: settings, MCPFile: mcp} {
		b, err := json.MarshalIndent(v, "", "  ")
		if err != nil {
			return nil, err
		}
		out[name] = append(b, '\n')
	}
	return out, nil
}

func (o InstallOptions) validate() error {
	var errs []error
	if !filepath.IsAbs(o.Dir) {
		errs = append(errs, fmt.Errorf("the managed settings directory %q is not an absolute path", o.Dir))
	}
	if !filepath.IsAbs(o.Gatekeeper) {
		errs = append(errs, fmt.Errorf("the gatekeeper binary %q is not an absolute path", o.Gatekeeper))
	}
	if !filepath.IsAbs(o.TokenFile) {
		errs = append(errs, fmt.Errorf("the token file %q is not an absolute path", o.TokenFile))
	}
	if o.Sidecar == "" {
		errs = append(errs, errors.New("no sidecar address"))
	}
	switch o.Hook {
	case HookCommand:
	case HookHTTP:
		if o.HookURL == "" {
			errs = append(errs, errors.New("an HTTP hook needs the sidecar's hook URL (serve --hook-listen)"))
		}
	default:
		errs = append(errs, fmt.Errorf("hook kind %q is neither %q nor %q", o.Hook, HookCommand, HookHTTP))
	}
	if o.HookTimeout < 5 {
		errs = append(errs, fmt.Errorf("a hook timeout of %d s is too short; give at least 5", o.HookTimeout))
	}
	return errors.Join(errs...)
}

// state is what install records in stateFile: for each file it wrote, the
// digest of what it wrote and what was there before, so that uninstall
// restores exactly that.
type state struct {
	Version int                   `json:"version"`
	Files   map[string]*fileState `json:"files"`
	// CreatedDir means the directory did not exist before.
	CreatedDir bool `json:"created_dir"`
	// Binary is the digest of the copy of the binary install made in the
	// directory (BinaryFile), "" when it made none.
	Binary string `json:"binary_sha256,omitempty"`
}

type fileState struct {
	Written string `json:"written_sha256"`
	// Previous is the file's content before the first install, nil when
	// it did not exist; PreviousMode its permission bits.
	Previous     []byte      `json:"previous"`
	PreviousMode fs.FileMode `json:"previous_mode,omitempty"`
}

// Change is one file an install or uninstall writes or removes.
type Change struct {
	Path string
	// Old and New are the content before and after; nil means absent.
	Old, New []byte
	// NotOurs means Old holds settings gatekeeper did not write.
	NotOurs bool
}

// Diff is a unified diff of the change.
func (c Change) Diff() string { return unifiedDiff(c.Path, c.Old, c.New) }

// Install writes the files of o into o.Dir and returns what it changed.
// A file that exists and that gatekeeper did not write (or that changed
// since it did) is not touched, and the error wraps ErrNotOurs, unless
// force is set; the changes are returned either way, for their diffs.
// What each file held before the first install is kept in the directory,
// for Uninstall.
//
// The binary the settings name must pass SecurePath (root's CLI runs it on
// every tool call, so whoever can replace it can replace the gate); with
// CopyFrom, that is the copy in Dir. One that does not is refused, and the
// error wraps ErrInsecure and lists why, unless force is set.
func Install(o InstallOptions, force bool) ([]Change, error) {
	var bin []byte
	if o.CopyFrom != "" {
		o.Gatekeeper = filepath.Join(o.Dir, BinaryFile)
		var err error
		if bin, err = os.ReadFile(o.CopyFrom); err != nil {
			return nil, fmt.Errorf("read the binary to copy: %w", err)
		}
		if problems := SecureDir(o.Dir); len(problems) > 0 && !force {
			return nil, insecure(o.Gatekeeper, problems)
		}
	} else if problems := SecurePath(o.Gatekeeper); len(problems) > 0 && !force {
		return nil, insecure(o.Gatekeeper, problems)
	}
	files, err := Files(o)
	if err != nil {
		return nil, err
	}
	st, err := readState(o.Dir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		_, statErr := os.Stat(o.Dir)
		st = &state{Version: 1, Files: map[string]*fileState{}, CreatedDir: errors.Is(statErr, fs.ErrNotExist)}
	}
	var changes []Change
	var notOurs []string
	for _, name := range slices.Sorted(maps.Keys(files)) {
		path := filepath.Join(o.Dir, name)
		old, mode, err := readFile(path)
		if err != nil {
			return nil, err
		}
		fsOld := st.Files[name]
		c := Change{Path: path, Old: old, New: files[name], NotOurs: old != nil && (fsOld == nil || digest.SHA256(old) != fsOld.Written)}
		if c.NotOurs {
			notOurs = append(notOurs, path)
		}
		if fsOld == nil {
			st.Files[name] = &fileState{Previous: old, PreviousMode: mode}
		}
		changes = append(changes, c)
	}
	if bin != nil {
		old, _, err := readFile(o.Gatekeeper)
		if err != nil {
			return nil, err
		}
		if old != nil && digest.SHA256(old) != st.Binary {
			notOurs = append(notOurs, o.Gatekeeper)
		}
	}
	if len(notOurs) > 0 && !force {
		return changes, fmt.Errorf("%w: %v (pass --force to replace them; uninstall then restores them)", ErrNotOurs, notOurs)
	}
	if err := os.MkdirAll(o.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("managed settings directory: %w", err)
	}
	if bin != nil {
		st.Binary = digest.SHA256(bin)
		if err := writeState(o.Dir, st); err != nil {
			return nil, err
		}
		if err := writeFile(o.Gatekeeper, bin, 0o755); err != nil {
			return nil, err
		}
	}
	for _, c := range changes {
		st.Files[filepath.Base(c.Path)].Written = digest.SHA256(c.New)
	}
	// The record first: a crash between the writes leaves files uninstall
	// can still recognise or restore.
	if err := writeState(o.Dir, st); err != nil {
		return nil, err
	}
	for _, c := range changes {
		if err := writeFile(c.Path, c.New, 0o644); err != nil {
			return nil, err
		}
	}
	return changes, nil
}

// Uninstall restores every file Install wrote in dir to what it held
// before (byte for byte, with its mode) or removes it if it did not exist,
// removes the record, and the directory if Install created it and it is
// empty. A file changed since Install wrote it is not touched, and the
// error wraps ErrNotOurs, unless force is set.
func Uninstall(dir string, force bool) ([]Change, error) {
	st, err := readState(dir)
	if err != nil {
		return nil, err
	}
	if st == nil {
		return nil, fmt.Errorf("gatekeeper has not installed Claude Code settings in %s (no %s there)", dir, stateFile)
	}
	var changes []Change
	var notOurs []string
	for _, name := range slices.Sorted(maps.Keys(st.Files)) {
		fst := st.Files[name]
		path := filepath.Join(dir, name)
		cur, _, err := readFile(path)
		if err != nil {
			return nil, err
		}
		c := Change{Path: path, Old: cur, New: fst.Previous, NotOurs: cur != nil && digest.SHA256(cur) != fst.Written}
		if c.NotOurs {
			notOurs = append(notOurs, path)
		}
		changes = append(changes, c)
	}
	if len(notOurs) > 0 && !force {
		return changes, fmt.Errorf("%w: %v changed since gatekeeper installed it (pass --force to restore it anyway)", ErrNotOurs, notOurs)
	}
	for _, c := range changes {
		fst := st.Files[filepath.Base(c.Path)]
		if fst.Previous == nil {
			if err := os.Remove(c.Path); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, err
			}
			continue
		}
		if err := writeFile(c.Path, fst.Previous, fst.PreviousMode); err != nil {
			return nil, err
		}
	}
	if st.Binary != "" {
		if err := os.Remove(filepath.Join(dir, BinaryFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return nil, err
		}
	}
	if err := os.Remove(filepath.Join(dir, stateFile)); err != nil {
		return nil, err
	}
	if st.CreatedDir {
		_ = os.Remove(dir) // only if empty
	}
	return changes, nil
}

func insecure(path string, problems []string) error {
	return fmt.Errorf("%w: %s: %s (Claude Code runs it under root's managed settings on every tool call, so whoever can replace it can turn gatekeeper off; "+
		"install it where only root can write, e.g. sudo install -o root -m 0755 bin/gatekeeper /usr/local/bin/, or pass --copy-binary; --force installs anyway)",
		ErrInsecure, path, strings.Join(problems, "; "))
}

func readState(dir string) (*state, error) {
	data, err := os.ReadFile(filepath.Join(dir, stateFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", stateFile, err)
	}
	var st state
	if err := json.Unmarshal(data, &st); err != nil || st.Version != 1 || st.Files == nil {
		return nil, fmt.Errorf("%s in %s is not a record gatekeeper can read", stateFile, dir)
	}
	return &st, nil
}

func writeState(dir string, st *state) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	// The previous files may be anyone's settings: readable by root only.
	return writeFile(filepath.Join(dir, stateFile), append(b, '\n'), 0o600)
}

// readFile returns a file's content and permission bits, or nil content
// when it does not exist.
func readFile(path string) ([]byte, fs.FileMode, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, err
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, 0, err
	}
	if data == nil {
		data = []byte{}
	}
	return data, fi.Mode().Perm(), nil
}

// writeFile replaces path atomically with data and mode.
func writeFile(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".gatekeeper-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}
