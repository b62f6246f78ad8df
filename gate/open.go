package gate

import (
	"context"
	"log/slog"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/client/claudecode"
)

// Inputs are what an Engine is built from, as the commands that decide
// take them (--policy, --rego-dir, --claude-code-dir, --decision-timeout).
// serve, run, decide and policy check all build their Engine with Open, so
// the same Inputs load the same modules, report the same revision and
// decide every call by the same rules, the operator's included.
type Inputs struct {
	// PolicyFile is the sandbox.policy.yaml path.
	PolicyFile string
	// RegoDir, when set, holds the operator's .rego files (Config.RegoDir).
	RegoDir string
	// ClaudeCodeDir, when set, is Claude Code's managed settings
	// directory: every binary and token file its settings name for
	// gatekeeper (claudecode.InstalledPaths) is write-protected in every
	// policy (Config.Protect), and is a module of the revision even when
	// it names none. "" for none.
	ClaudeCodeDir string
	// DecisionTimeout bounds one evaluation; zero means 1s. It is no part
	// of the revision.
	DecisionTimeout time.Duration
	// Logger receives reload outcomes; nil means slog.Default().
	Logger *slog.Logger
	// Source, when set, supplies the policy and the operator's modules
	// in place of PolicyFile and RegoDir (Config.Source).
	Source Source
}

// Open loads and compiles the policy of in, as New does, and fails as New
// fails: a broken policy file, Rego module or managed settings file is an
// error naming it.
func Open(ctx context.Context, in Inputs) (*Engine, error) {
	cfg := Config{PolicyFile: in.PolicyFile, RegoDir: in.RegoDir, DecisionTimeout: in.DecisionTimeout, Logger: in.Logger, Source: in.Source}
	if dir := in.ClaudeCodeDir; dir != "" {
		cfg.Protect = func() ([]string, error) { return claudecode.InstalledPaths(dir) }
	}
	return New(ctx, cfg)
}
