package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/client/claudecode"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// sidecarFlags are how `hook` and `mcp` reach the sidecar.
type sidecarFlags struct {
	url, token, tokenFile *string
}

func addSidecarFlags(fs *flag.FlagSet) sidecarFlags {
	return sidecarFlags{
		url:       fs.String("url", defaultSocket(), "the sidecar: unix:///path.sock, tcp://127.0.0.1:PORT or http://127.0.0.1:PORT"),
		token:     fs.String("token", "", "the bearer token (set GATEKEEPER_TOKEN rather than this flag: arguments are visible to other users)"),
		tokenFile: fs.String("token-file", "", "file holding the bearer token; wins over --token"),
	}
}

func (f sidecarFlags) resolve() (client.Endpoint, func() (string, error), error) {
	ep, err := client.ParseURL(*f.url)
	token := func() (string, error) { return client.Token(*f.token, *f.tokenFile) }
	return ep, token, err
}

// cmdHook is a Claude Code command hook. It fails closed: whatever goes
// wrong, flags included, it denies on stderr and exits 2.
func cmdHook(ctx context.Context, args []string, env envLookup, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("hook", `hook [--url URL] [--token-file FILE] [--timeout D] < hook-input.json

A Claude Code command hook: forwards the hook input on stdin to the sidecar
and prints its answer. On any failure it denies and exits 2.`, stderr)
	sf := addSidecarFlags(fs)
	timeout := fs.Duration("timeout", 10*time.Second, "longest wait for the sidecar's answer; then the call is denied")
	if err := parse(fs, args, env); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		fmt.Fprintln(stderr, wire.WithRule(fmt.Sprintf("gatekeeper hook cannot start (%v), so this tool call is denied", err), claudecode.UnavailableRule))
		return exitError(2)
	}
	ep, token, err := sf.resolve()
	if err != nil {
		fmt.Fprintln(stderr, wire.WithRule(fmt.Sprintf("gatekeeper hook cannot start (%v), so this tool call is denied", err), claudecode.UnavailableRule))
		return exitError(2)
	}
	if code := claudecode.RunHook(ctx, claudecode.HookOptions{Sidecar: ep, Token: token, Timeout: *timeout}, stdin, stdout, stderr); code != 0 {
		return exitError(code)
	}
	return nil
}

// cmdMCP is the sandboxed_code MCP server Claude Code starts per session.
func cmdMCP(ctx context.Context, args []string, env envLookup, stdin io.Reader, stdout, stderr io.Writer) error {
	fs := newFlags("mcp", `mcp [--url URL] [--token-file FILE]

The stdio MCP server sandboxed_code for Claude Code (from managed-mcp.json):
its tool run runs code in gatekeeper's sandbox, in the query of the Claude
Code session named by CLAUDE_CODE_SESSION_ID.`, stderr)
	sf := addSidecarFlags(fs)
	logLevel := fs.String("log-level", "warn", "debug, info, warn or error (logs go to stderr)")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	log := newLogger(stderr, *logLevel)
	ep, token, err := sf.resolve()
	if err != nil {
		return err
	}
	sessionID, _ := env("CLAUDE_CODE_SESSION_ID")
	if sessionID == "" {
		return errors.New("mcp: CLAUDE_CODE_SESSION_ID is not set: Claude Code sets it for the MCP servers it starts")
	}
	sess := &client.Session{Endpoint: ep, Token: token, ID: sessionID, Client: "gatekeeper-mcp/" + version}
	// Attached from the start: the sidecar trusts this session's
	// sandboxed_code server once a connection holding the token is.
	holdCtx, stopHold := context.WithCancel(ctx)
	defer stopHold()
	attached := make(chan string, 1)
	go sess.Hold(holdCtx, time.Second,
		func(desc string) {
			log.Debug("attached to the Claude Code session", "session_id", sessionID)
			select {
			case attached <- desc:
			default:
			}
		},
		func(err error) { log.Warn("not attached to the sidecar; runs are denied until it is back", "err", err) })
	// Answer the CLI only once attached (or after a while, so a sidecar
	// that is down does not hold the CLI up: its calls are denied anyway).
	// The description is the first attach's: the CLI lists the tools once.
	var desc string
	select {
	case desc = <-attached:
	case <-time.After(3 * time.Second):
	case <-ctx.Done():
	}
	srv := &claudecode.MCPServer{Sandbox: sess, Version: version, Description: desc}
	return srv.Serve(ctx, stdin, stdout)
}

// cmdClaudeCode is `claude-code install` and `claude-code uninstall`.
func cmdClaudeCode(sub string, args []string, env envLookup, stdout, stderr io.Writer) error {
	if sub == "uninstall" {
		fs := newFlags("claude-code uninstall", "claude-code uninstall [--path DIR] [--force]", stderr)
		dir := fs.String("path", claudecode.DefaultManagedDir(), "the managed settings directory")
		force := fs.Bool("force", false, "restore files even if they changed since install")
		if err := parse(fs, args, env); err != nil {
			return err
		}
		changes, err := claudecode.Uninstall(*dir, *force)
		printChanges(stdout, changes)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "Claude Code's managed settings in %s are as they were before gatekeeper installed them\n", *dir)
		return nil
	}
	fs := newFlags("claude-code install", `claude-code install [--path DIR] [--hook command|http] [--copy-binary] [--print] [--check] [--force]

Writes Claude Code's managed settings (managed-settings.json and
managed-mcp.json in DIR) so every tool call of the CLI is decided by the
gatekeeper sidecar and code runs in its sandbox; see docs/CLAUDE-CODE.md.`, stderr)
	dir := fs.String("path", claudecode.DefaultManagedDir(), "the managed settings directory")
	hook := fs.String("hook", claudecode.HookCommand, "command: the CLI runs `gatekeeper hook` per call (reaches the sidecar's socket); http: the CLI POSTs to --hook-url, with the token from "+claudecode.TokenEnv)
	url := fs.String("url", defaultSocket(), "the sidecar address the command hook and the MCP server use")
	tokenFile := fs.String("token-file", defaultTokenFile(), "the token file the command hook and the MCP server read")
	hookURL := fs.String("hook-url", "", "the HTTP hook URL: the address of `gatekeeper serve --hook-listen` with path "+wire.HookPath)
	bin := fs.String("gatekeeper", "", "the gatekeeper binary the CLI runs (default: this one); it must be root's, in directories only root can write")
	copyBinary := fs.Bool("copy-binary", false, "copy the binary into the managed settings directory (as "+claudecode.BinaryFile+", root's) and name the copy")
	check := fs.Bool("check", false, "report on the installation in --path: the settings files, and who can replace each binary and file they name")
	timeout := fs.Int("hook-timeout", 30, "seconds the CLI waits for one hook call before blocking it")
	print := fs.Bool("print", false, "print the files instead of writing them")
	force := fs.Bool("force", false, "replace settings gatekeeper did not write (uninstall restores them), or name a binary that is not root's alone")
	if err := parse(fs, args, env); err != nil {
		return err
	}
	if *check {
		dir := *dir
		if a, err := filepath.Abs(dir); err == nil {
			dir = a
		}
		r := claudecode.Check(dir)
		for _, l := range r.Lines {
			fmt.Fprintln(stdout, l)
		}
		if len(r.Problems) > 0 {
			return fmt.Errorf("claude-code install --check: %d problem(s) in %s", len(r.Problems), dir)
		}
		fmt.Fprintf(stdout, "Claude Code is under gatekeeper, and only root can replace the gate\n")
		return nil
	}
	if *bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return err
		}
		*bin = exe
	}
	abs := func(p string) string {
		if a, err := filepath.Abs(p); err == nil {
			return a
		}
		return p
	}
	o := claudecode.InstallOptions{Dir: abs(*dir), Hook: *hook, Gatekeeper: abs(*bin), Sidecar: *url, TokenFile: abs(*tokenFile), HookURL: *hookURL, HookTimeout: *timeout}
	if *copyBinary {
		o.CopyFrom, o.Gatekeeper = o.Gatekeeper, filepath.Join(o.Dir, claudecode.BinaryFile)
	}
	if *print {
		files, err := claudecode.Files(o)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(files))
		for n := range files {
			names = append(names, n)
		}
		sort.Strings(names)
		for _, n := range names {
			fmt.Fprintf(stdout, "# %s\n%s", filepath.Join(o.Dir, n), files[n])
		}
		return nil
	}
	if *force && !*print {
		problems := claudecode.SecurePath(o.Gatekeeper)
		if *copyBinary {
			problems = claudecode.SecureDir(o.Dir)
		}
		if len(problems) > 0 {
			fmt.Fprintf(stderr, "warning: installing anyway (--force), but %s is not root's alone: %s. Claude Code runs it under root's managed settings on every tool call, so whoever can replace it can turn gatekeeper off.\n",
				o.Gatekeeper, strings.Join(problems, "; "))
		}
	}
	changes, err := claudecode.Install(o, *force)
	printChanges(stdout, changes)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Claude Code is under gatekeeper: managed settings written to %s\n", o.Dir)
	return nil
}

func printChanges(w io.Writer, changes []claudecode.Change) {
	for _, c := range changes {
		if string(c.Old) == string(c.New) && (c.Old == nil) == (c.New == nil) {
			continue
		}
		if c.NotOurs {
			fmt.Fprintf(w, "%s holds settings gatekeeper did not write:\n", c.Path)
		}
		fmt.Fprint(w, c.Diff())
	}
}
