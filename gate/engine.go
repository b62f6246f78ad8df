// Package gate decides tool calls. An Engine holds the operator's policy and
// the compiled Rego; a Query is one agent query with its effective sandbox
// policy; Query.Decide turns a tool call into allow, deny or ask.
//
// Everything fails closed: a policy error, an evaluation error, a timeout, an
// undefined or malformed result is a deny with rule "gatekeeper.error".
package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	oparego "github.com/open-policy-agent/opa/v1/rego"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	builtin "github.com/gatekeeper-ai/gatekeeper/rego"
)

// Config says where the policy comes from. The commands build it from
// Inputs with Open, so that they build it alike.
type Config struct {
	// PolicyFile is the sandbox.policy.yaml path.
	PolicyFile string
	// RegoDir optionally holds operator .rego files loaded beside the
	// built-in ones (same packages; *_test.rego files are skipped).
	RegoDir string
	// Home expands "~" in paths and globs; empty means the process's home.
	Home string
	// DecisionTimeout bounds one evaluation; zero means 1s.
	DecisionTimeout time.Duration
	// Logger receives reload outcomes; nil means slog.Default().
	Logger *slog.Logger
	// Protect, when set, returns absolute paths that every policy
	// write-protects in the non-liftable group policy.InstallGroup: the
	// binaries and files that Claude Code's installed managed settings
	// name (Open sets it from Inputs.ClaudeCodeDir). It is called at every load and reload check, and a change in
	// what it returns, or in where a link among them leads, is a new
	// revision; an error refuses the load. Each path is protected as
	// written and, when a link is in it, where it leads.
	Protect func() ([]string, error)
	// Source, when set, supplies the policy and the operator's modules
	// in place of PolicyFile and RegoDir (a policy bundle: gate/bundle).
	// It is asked at every load and reload; an error refuses the load.
	Source Source
}

// Source supplies a policy from somewhere other than a file: the
// document it returns is validated and compiled as the file and Rego
// directory are, with its names in every error.
type Source interface {
	PolicyDocument() (Document, error)
}

// Document is a policy and the operator's modules as a Source holds
// them.
type Document struct {
	// Name names the policy in errors ("bundle r7: gatekeeper/sandbox.policy.yaml").
	Name string
	// Policy is the sandbox.policy.yaml text; Dir resolves a relative
	// workspace_root in it.
	Policy []byte
	Dir    string
	// Modules are the operator's Rego modules by name, checked and
	// compiled as --rego-dir modules are.
	Modules map[string][]byte
	// Revision, when set, leads the engine's revision
	// ("bundle:<Revision>@sha256:..."), so decisions and audit lines
	// carry it.
	Revision string
}

// Engine holds the current policy snapshot. It is safe for concurrent use;
// Reload swaps the snapshot atomically and keeps the old one on failure.
type Engine struct {
	cfg    Config
	log    *slog.Logger
	cur    atomic.Pointer[snapshot]
	mu     sync.Mutex // serializes Reload
	failed string     // revision (or read error) of the last refused reload

	histMu  sync.Mutex
	history []ReloadEvent // oldest first, at most maxReloadHistory

	// servers are the first load's mcp_servers: the sidecar starts their
	// clients once (cmd/gatekeeper), so a reload that changes them takes
	// effect only at the next start, and Reload says so.
	servers map[string]policy.MCPServer
}

// maxReloadHistory bounds the reload events an Engine keeps.
const maxReloadHistory = 32

// ReloadEvent is one entry of an Engine's reload history: the first load,
// a reload that took effect, or one that was refused.
type ReloadEvent struct {
	Time time.Time
	// Revision is the revision loaded or refused (empty when the sources
	// could not even be read); Previous is the one serving before.
	Revision, Previous string
	// Err says why the reload was refused; empty when it took effect.
	Err string
}

// snapshot is one loaded, compiled policy revision. It is never mutated.
type snapshot struct {
	revision    string
	policy      *policy.Policy
	decide      oparego.PreparedEvalQuery
	constraints oparego.PreparedEvalQuery
	root        string   // workspace root, symlinks resolved
	home        string   // home directory for ~
	installed   []string // Config.Protect's paths at load
	base        *Effective
	// decisionTimeout is Config.DecisionTimeout, for the nested calls of
	// the runs its Effectives allow (codecall.go).
	decisionTimeout time.Duration
}

// New loads and compiles the policy. A broken policy file or Rego module is
// an error naming the file and line: the sidecar does not start.
func New(ctx context.Context, cfg Config) (*Engine, error) {
	if cfg.DecisionTimeout <= 0 {
		cfg.DecisionTimeout = time.Second
	}
	if cfg.Home == "" {
		cfg.Home, _ = os.UserHomeDir()
	}
	e := &Engine{cfg: cfg, log: cfg.Logger}
	if e.log == nil {
		e.log = slog.Default()
	}
	pol, mods, err := e.sources()
	if err != nil {
		return nil, err
	}
	snap, err := e.load(ctx, pol, mods)
	if err != nil {
		return nil, err
	}
	e.cur.Store(snap)
	e.servers = snap.policy.MCPServers
	e.remember(ReloadEvent{Revision: snap.revision})
	return e, nil
}

// Reloads returns the reload history, oldest first: the first load, then
// every reload that changed the revision or was refused, at most the last
// 32. A refused reload is listed once until the sources change again,
// however often the watcher retries it.
func (e *Engine) Reloads() []ReloadEvent {
	e.histMu.Lock()
	defer e.histMu.Unlock()
	return slices.Clone(e.history)
}

func (e *Engine) remember(ev ReloadEvent) {
	ev.Time = time.Now()
	e.histMu.Lock()
	defer e.histMu.Unlock()
	if len(e.history) == maxReloadHistory {
		e.history = slices.Delete(e.history, 0, 1)
	}
	e.history = append(e.history, ev)
}

// Revision is the current policy revision: "sha256:" over the policy file
// and every loaded Rego module.
func (e *Engine) Revision() string { return e.cur.Load().revision }

// Reload loads the policy file and Rego again. On success the new revision
// serves every later decision; on failure the old one stays in force and the
// error says why. Reloading an unchanged revision does nothing.
func (e *Engine) Reload(ctx context.Context) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	old := e.cur.Load()
	pol, mods, err := e.sources()
	if err != nil {
		if key := "read: " + err.Error(); key != e.failed {
			e.failed = key
			e.remember(ReloadEvent{Previous: old.revision, Err: err.Error()})
		}
		return err
	}
	rev := revisionOf(pol, mods)
	if rev == old.revision {
		return nil
	}
	snap, err := e.load(ctx, pol, mods)
	if err != nil {
		if rev != e.failed {
			e.log.Error("policy reload refused; keeping the old policy", "revision", old.revision, "err", err)
			e.remember(ReloadEvent{Revision: rev, Previous: old.revision, Err: err.Error()})
		}
		e.failed = rev
		return err
	}
	e.failed = ""
	e.cur.Store(snap)
	e.remember(ReloadEvent{Revision: snap.revision, Previous: old.revision})
	e.log.Info("policy reloaded", "old_revision", old.revision, "revision", snap.revision)
	if !reflect.DeepEqual(snap.policy.MCPServers, e.servers) && !reflect.DeepEqual(snap.policy.MCPServers, old.policy.MCPServers) {
		e.log.Warn("policy reload: mcp_servers changed, but the MCP servers are the ones the sidecar started with until it restarts",
			"revision", snap.revision, "started_with", slices.Sorted(maps.Keys(e.servers)), "policy_names", slices.Sorted(maps.Keys(snap.policy.MCPServers)))
	}
	return nil
}

// Refused records a policy refused before it reached the engine (a
// bundle whose signature, revision or expiry a Source rejected) in the
// reload history, as a refused reload is: the current policy stays.
func (e *Engine) Refused(revision string, err error) {
	e.remember(ReloadEvent{Revision: revision, Previous: e.Revision(), Err: err.Error()})
}

// Watch reloads whenever the policy file or Rego directory changes, checking
// every interval, until ctx ends.
func (e *Engine) Watch(ctx context.Context, interval time.Duration) {
	t := time.NewTicker(interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			_ = e.Reload(ctx) // logged by Reload
		}
	}
}

// protectSource names the source holding Config.Protect's paths, one a
// line.
const protectSource = "claude-code install (write-protected paths)"

type source struct {
	name     string
	data     []byte
	operator bool   // from Config.RegoDir or a Source
	dir      string // a Source's Document.Dir
	label    string // a Source's Document.Revision
}

// sources reads the policy file and every operator module, in a fixed order.
func (e *Engine) sources() (pol source, mods []source, err error) {
	var doc Document
	if e.cfg.Source != nil {
		if doc, err = e.cfg.Source.PolicyDocument(); err != nil {
			return pol, nil, fmt.Errorf("%w: %w", ErrPolicy, err)
		}
		pol = source{name: doc.Name, data: doc.Policy, dir: doc.Dir, label: doc.Revision}
	} else {
		data, err := os.ReadFile(e.cfg.PolicyFile)
		if err != nil {
			return pol, nil, fmt.Errorf("%w: read %s: %w", ErrPolicy, e.cfg.PolicyFile, err)
		}
		pol = source{name: e.cfg.PolicyFile, data: data}
	}
	err = fs.WalkDir(builtin.Files(), ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(builtin.Files(), p)
		mods = append(mods, source{name: "rego/" + p, data: b})
		return err
	})
	if err != nil {
		return pol, nil, err
	}
	if e.cfg.Protect != nil {
		paths, err := e.cfg.Protect()
		if err != nil {
			return pol, nil, fmt.Errorf("%w: %w", ErrPolicy, err)
		}
		paths = withLinkTargets(paths)
		mods = append(mods, source{name: protectSource, data: []byte(strings.Join(paths, "\n"))})
	}
	for _, n := range slices.Sorted(maps.Keys(doc.Modules)) {
		mods = append(mods, source{name: n, data: doc.Modules[n], operator: true})
	}
	if e.cfg.RegoDir != "" {
		names, err := filepath.Glob(filepath.Join(e.cfg.RegoDir, "*.rego"))
		if err != nil {
			return pol, nil, fmt.Errorf("%w: %w", ErrPolicy, err)
		}
		if _, err := os.Stat(e.cfg.RegoDir); err != nil {
			return pol, nil, fmt.Errorf("%w: rego dir: %w", ErrPolicy, err)
		}
		sort.Strings(names)
		for _, n := range names {
			if strings.HasSuffix(n, "_test.rego") {
				continue
			}
			b, err := os.ReadFile(n)
			if err != nil {
				return pol, nil, fmt.Errorf("%w: %w", ErrPolicy, err)
			}
			mods = append(mods, source{name: n, data: b, operator: true})
		}
	}
	return pol, mods, nil
}

// withLinkTargets returns paths with, after each one that is or lies
// below a symbolic link, where it leads (resolved as a write's path is,
// hostpath.Normalize, so a dangling link's target counts): a write is
// judged at its own path and where it leads, never at the links that lead
// to it, so an installed binary named by a link into the workspace would
// otherwise be writable at its target. A path that does not resolve is
// kept as written; no write can resolve through it either.
func withLinkTargets(paths []string) []string {
	out := make([]string, 0, len(paths))
	for _, p := range paths {
		out = append(out, p)
		if n, err := hostpath.Normalize(p, hostpath.Options{}); err == nil && n.Resolved != p {
			out = append(out, n.Resolved)
		}
	}
	return out
}

func revisionOf(pol source, mods []source) string {
	h := sha256.New()
	for _, s := range append([]source{pol}, mods...) {
		fmt.Fprintf(h, "%s\x00%d\x00", s.name, len(s.data))
		h.Write(s.data)
	}
	rev := "sha256:" + hex.EncodeToString(h.Sum(nil))
	if pol.label != "" {
		rev = "bundle:" + pol.label + "@" + rev
	}
	return rev
}

// load compiles a snapshot from the sources read by sources.
func (e *Engine) load(ctx context.Context, pol source, mods []source) (*snapshot, error) {
	dir := pol.dir
	if dir == "" {
		var err error
		if dir, err = filepath.Abs(filepath.Dir(pol.name)); err != nil {
			return nil, err
		}
	}
	p, err := policy.Decode(pol.name, pol.data, dir)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	operator := map[string]string{}
	for _, m := range mods {
		if m.operator {
			operator[m.name] = string(m.data)
		}
	}
	c, err := builtin.CompilePolicy(operator)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrPolicy, err)
	}
	// A request rule that can never fire is refused as a compile error is:
	// its author believes requests are checked that are not.
	if probs := httpRuleProblems(operator, p); len(probs) > 0 {
		return nil, fmt.Errorf("%w: %s", ErrPolicy, strings.Join(probs, "\n"))
	}
	prep := func(q string) (oparego.PreparedEvalQuery, error) {
		return oparego.New(
			oparego.Query(q),
			oparego.Compiler(c),
			oparego.StrictBuiltinErrors(true),
		).PrepareForEval(ctx)
	}
	s := &snapshot{revision: revisionOf(pol, mods), policy: p, home: e.cfg.Home, decisionTimeout: e.cfg.DecisionTimeout}
	for _, m := range mods {
		if m.name == protectSource && len(m.data) > 0 {
			s.installed = strings.Split(string(m.data), "\n")
		}
	}
	if s.decide, err = prep("data.gatekeeper.decision"); err != nil {
		return nil, fmt.Errorf("%w: prepare decision: %w", ErrPolicy, err)
	}
	if s.constraints, err = prep("data.gatekeeper.constraints.violations"); err != nil {
		return nil, fmt.Errorf("%w: prepare constraints: %w", ErrPolicy, err)
	}
	s.root = resolveRoot(p.WorkspaceRoot)
	if s.base, err = s.effective(p.Sandbox, p.CodeCalls); err != nil {
		return nil, err
	}
	// The base policy must itself satisfy the constraints over an empty override.
	if v, err := s.violations(ctx, p.Sandbox); err != nil {
		return nil, fmt.Errorf("%w: constraints: %w", ErrPolicy, err)
	} else if len(v) > 0 {
		lines := make([]string, len(v))
		for i, msg := range v {
			path, _, _ := strings.Cut(msg, " ")
			lines[i] = p.Where(path) + ": " + msg
		}
		return nil, fmt.Errorf("%w: %s", ErrPolicy, strings.Join(lines, "\n"))
	}
	return s, nil
}

// resolveRoot resolves symlinks in the workspace root so that resolved
// paths can be compared with it; a part that does not exist yet stays as is.
func resolveRoot(root string) string {
	if p, err := hostpath.Normalize(root, hostpath.Options{}); err == nil {
		return p.Resolved
	}
	return root
}
