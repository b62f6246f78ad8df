package main

import (
	"context"
	"flag"
	"log/slog"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/client/claudecode"
)

// engineOptions are the flags every command that decides builds its
// engine from: serve, run, decide and policy check register them with
// engineFlags and open the engine with open (gate.Open), so each takes
// --policy, --rego-dir and --claude-code-dir (and their GATEKEEPER_
// variables) the one way and reports the same revision for them.
type engineOptions struct{ in gate.Inputs }

// engineFlags registers the engine's flags on fs; decides adds
// --decision-timeout, which a command that only loads the policy (policy
// check) has no use for.
func engineFlags(fs *flag.FlagSet, decides bool) *engineOptions {
	o := &engineOptions{}
	fs.StringVar(&o.in.PolicyFile, "policy", "sandbox.policy.yaml", "policy file")
	fs.StringVar(&o.in.RegoDir, "rego-dir", "", "directory of the operator's .rego files, compiled into the built-in packages (docs/SANDBOX.md, \"Writing your own rules\")")
	fs.StringVar(&o.in.ClaudeCodeDir, "claude-code-dir", claudecode.DefaultManagedDir(), "Claude Code's managed settings directory: every binary and token file its settings name for gatekeeper is write-protected in every policy (\"\" for none)")
	if decides {
		fs.DurationVar(&o.in.DecisionTimeout, "decision-timeout", time.Second, "longest a policy evaluation may take; then the call is denied")
	}
	return o
}

// open loads the policy, logging reloads to log.
func (o *engineOptions) open(ctx context.Context, log *slog.Logger) (*gate.Engine, error) {
	in := o.in
	in.Logger = log
	return gate.Open(ctx, in)
}
