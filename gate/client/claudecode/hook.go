// Package claudecode puts Claude Code's CLI under gatekeeper: the command
// hook (`gatekeeper hook`), the stdio MCP server with the sandbox's run
// tool (`gatekeeper mcp`), and the managed settings that wire both into
// the CLI (`gatekeeper claude-code install`). docs/CLAUDE-CODE.md describes
// the contract with the CLI that this package relies on. It reaches the
// sidecar through gate/client and speaks only the protocol (gate/wire).
package claudecode

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/client"
	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// UnavailableRule names the deny of a hook that could not ask gatekeeper;
// @gatekeeper/client's fail-closed deny has the same rule.
const UnavailableRule = "client.gatekeeper_unavailable"

// maxHookInput bounds the hook input read from stdin; the sidecar refuses
// more than its frame limit (1 MiB by default) itself.
const maxHookInput = 8 << 20

// HookOptions configure RunHook.
type HookOptions struct {
	// Sidecar is where the sidecar listens (its socket, or the hook
	// listener).
	Sidecar client.Endpoint
	// Token returns the bearer token.
	Token func() (string, error)
	// Timeout bounds the whole exchange; keep it under the hook's timeout
	// in the CLI's settings, so the deny is ours and names its cause.
	Timeout time.Duration
}

// RunHook is `gatekeeper hook`, a Claude Code command hook: it forwards
// the hook input on stdin to the sidecar's hook endpoint and prints the
// answer on stdout, returning exit code 0. On any failure (no token, an
// unreachable or refusing sidecar, a timeout, an input too large, an
// answer that is not a JSON object) it writes a deny the model can read to
// stderr and returns 2, which the CLI treats as a block for PreToolUse and
// a deny for PermissionRequest, with or without onFailure.
func RunHook(ctx context.Context, o HookOptions, stdin io.Reader, stdout, stderr io.Writer) int {
	deny := func(err error) int {
		fmt.Fprintln(stderr, wire.WithRule(fmt.Sprintf("gatekeeper is unavailable (%v), so this tool call is denied", err), UnavailableRule))
		return 2
	}
	ctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	input, err := io.ReadAll(io.LimitReader(stdin, maxHookInput+1))
	switch {
	case err != nil:
		return deny(fmt.Errorf("read the hook input: %w", err))
	case len(input) > maxHookInput:
		return deny(fmt.Errorf("the hook input is larger than %d bytes", maxHookInput))
	}
	token, err := o.Token()
	if err != nil {
		return deny(err)
	}
	answer, err := o.Sidecar.Hook(ctx, token, input)
	if err != nil {
		if ctx.Err() != nil {
			err = fmt.Errorf("no answer within %v: %w", o.Timeout, err)
		}
		return deny(err)
	}
	if _, err := stdout.Write(append(answer, '\n')); err != nil {
		return deny(fmt.Errorf("write the answer: %w", err))
	}
	return 0
}
