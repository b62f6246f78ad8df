// Command gatekeeper is the sidecar that decides every tool call of an AI
// agent and runs approved code in a sandbox. main only wires: it parses
// flags, sets up logging and a signal-cancelled context, and calls run.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// version is set at build time with -ldflags "-X main.version=...".
var version = "0.1.0-dev"

// exitError carries a process exit status without a message of its own.
type exitError int

func (e exitError) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	var code exitError
	switch {
	case err == nil:
	case errors.As(err, &code):
		os.Exit(int(code))
	case errors.Is(err, flag.ErrHelp):
		os.Exit(0)
	default:
		// An error can carry the model's text (a path, a reason).
		fmt.Fprintln(os.Stderr, "gatekeeper:", untrusted.TerminalText(err.Error()))
		os.Exit(1)
	}
}

const usage = `gatekeeper: the sidecar between an AI agent and everything it can do

Usage:
  gatekeeper serve           serve the wire protocol (docs/protocol.md)
  gatekeeper policy check F  validate a policy file; print every problem with its location
  gatekeeper decide          decide one call given as JSON on stdin
  gatekeeper run             run code in the sandbox with no agent
  gatekeeper image build     build sandbox image profiles locally (python; PROFILE...; --all)
  gatekeeper bundle build    make a (signed) OPA bundle of a policy and Rego directory, for serve --bundle
  gatekeeper audit verify P  verify an audit log's hash chain, across rotated files
  gatekeeper runs list       list the runs recorded in an artifacts directory (serve --artifacts-dir)
  gatekeeper runs show ID    print one run's artifact
  gatekeeper tail            follow the live console's stream of decisions and runs (serve --ui)
  gatekeeper claude-code install|uninstall
                             put Claude Code's CLI under gatekeeper (managed settings), or undo it
  gatekeeper hook            Claude Code command hook: ask the sidecar about one hook call
  gatekeeper mcp             Claude Code MCP server sandboxed_code: run code in the sandbox
  gatekeeper version         print the version

Every flag can also be set from the environment: --token-file is
GATEKEEPER_TOKEN_FILE, and so on. Run "gatekeeper CMD --help" for a command's flags.
`

// run dispatches a subcommand.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	if len(args) == 0 || args[0] == "-h" || args[0] == "--help" || args[0] == "help" {
		fmt.Fprint(stdout, usage)
		if len(args) == 0 {
			return exitError(2)
		}
		return nil
	}
	cmd, rest := args[0], args[1:]
	if (cmd == "policy" || cmd == "audit" || cmd == "image" || cmd == "claude-code" || cmd == "runs" || cmd == "bundle") && len(rest) > 0 && rest[0] != "-h" && rest[0] != "--help" {
		cmd, rest = cmd+" "+rest[0], rest[1:]
	}
	env := envLookup(os.LookupEnv)
	switch cmd {
	case "serve":
		return cmdServe(ctx, rest, env, stdout, stderr)
	case "policy check":
		return cmdPolicyCheck(ctx, rest, env, stdout, stderr)
	case "decide":
		return cmdDecide(ctx, rest, env, stdin, stdout, stderr)
	case "run":
		return cmdRun(ctx, rest, env, stdin, stdout, stderr)
	case "bundle build":
		return cmdBundleBuild(ctx, rest, env, stdout, stderr)
	case "image build":
		return cmdImageBuild(ctx, rest, env, stdout, stderr)
	case "audit verify":
		return cmdAuditVerify(rest, env, stdin, stdout, stderr)
	case "runs list":
		return cmdRunsList(rest, env, stdout, stderr)
	case "runs show":
		return cmdRunsShow(rest, env, stdout, stderr)
	case "tail":
		return cmdTail(ctx, rest, env, stdout, stderr)
	case "claude-code install":
		return cmdClaudeCode("install", rest, env, stdout, stderr)
	case "claude-code uninstall":
		return cmdClaudeCode("uninstall", rest, env, stdout, stderr)
	case "hook":
		return cmdHook(ctx, rest, env, stdin, stdout, stderr)
	case "mcp":
		return cmdMCP(ctx, rest, env, stdin, stdout, stderr)
	case "version":
		fmt.Fprintln(stdout, "gatekeeper", version)
		return nil
	}
	fmt.Fprintf(stderr, "gatekeeper: unknown command %q\n\n%s", cmd, usage)
	return exitError(2)
}

func newLogger(w io.Writer, level string) *slog.Logger {
	var l slog.Level
	if err := l.UnmarshalText([]byte(level)); err != nil {
		l = slog.LevelInfo
	}
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: l}))
}
