package gate

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/gate/hostpath"
	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/internal/pathglob"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Effective is a query's effective policy under one revision: the base
// policy with the query's sandbox override merged in. It is never mutated.
type Effective struct {
	// Revision is the policy revision it was computed under.
	Revision string
	// Policy is the whole effective policy (tools, workspace, sandbox,
	// ceilings, code_calls).
	Policy policy.Policy
	// Hash is "sha256:" over the canonical JSON of Policy.
	Hash string
	// JSON is the canonical JSON of Policy (sizes in bytes, durations in ms).
	JSON json.RawMessage

	term     *ast.Term // Policy as a Rego value, converted once
	root     string
	rootTerm *ast.Term // root as a Rego string
	// deny is sandbox.fs.deny with ~ expanded, compiled by the one path
	// glob matcher (internal/pathglob) the runner's /deps check uses too.
	deny *pathglob.Set
	// writeProtect is the built-in write-protect list less the groups
	// sandbox.fs.write_protect_allow lifts, then sandbox.fs.write_protect
	// (~ expanded); writeEntries says where each glob comes from.
	writeProtect *pathglob.Set
	writeEntries []writeEntry
	// globsTerms are input.deny_globs and input.write_protect_globs,
	// converted once.
	globsTerms [2]*ast.Term
	// netAllow and netDeny are sandbox.net.allow and .deny parsed, in
	// order, for the WebFetch facts.
	netAllow, netDeny []nethost.Pattern
	// runLanguages is runner.LanguageNames as a Rego array, the input's
	// run_languages.
	runLanguages *ast.Term
	home         string
	// snap is the snapshot it was computed under: its Rego decides the
	// nested calls of the runs it allows (codecall.go).
	snap *snapshot

	// matchCache memoizes, per directory, which deny and write-protect
	// globs match it (string -> pathMatches, see matches); matchCacheLen
	// counts its entries. Safe for concurrent use; the rest of an
	// Effective is never changed.
	matchCache    sync.Map
	matchCacheLen atomic.Int32
}

// writeEntry is where a write-protect glob comes from and why it is there.
type writeEntry struct {
	entry string // a built-in group's name, or "sandbox.fs.write_protect"
	why   string
}

// writeProtectList returns the effective write-protect globs of sb, home
// expanded, with where each comes from.
func writeProtectList(sb policy.Sandbox, home string, installed []string) ([]string, []writeEntry) {
	var globs []string
	var entries []writeEntry
	// The groups that cannot be lifted come first, so that a path in both
	// (.git/hooks is in git_dir too) is reported by the one that holds.
	groups := policy.BuiltinWriteProtect()
	slices.SortStableFunc(groups, func(a, b policy.ProtectGroup) int {
		switch {
		case a.Liftable == b.Liftable:
			return 0
		case b.Liftable:
			return -1
		}
		return 1
	})
	for _, g := range groups {
		if slices.Contains(sb.FS.WriteProtectAllow, g.Name) {
			continue
		}
		for _, glob := range g.Globs {
			globs = append(globs, glob)
			entries = append(entries, writeEntry{entry: g.Name, why: g.Why})
		}
		if g.Name == policy.InstallGroup {
			for _, p := range installed {
				globs = append(globs, escapeGlob(p))
				entries = append(entries, writeEntry{entry: g.Name, why: g.Why})
			}
		}
	}
	for _, glob := range sb.FS.WriteProtect {
		globs = append(globs, hostpath.ExpandHome(glob, home))
		entries = append(entries, writeEntry{entry: "sandbox.fs.write_protect", why: "the policy lists it"})
	}
	return globs, entries
}

// escapeGlob makes a path a glob that matches only itself.
func escapeGlob(p string) string {
	var b strings.Builder
	for _, r := range p {
		if strings.ContainsRune(`\*?[]{}!`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func (s *snapshot) effective(sb policy.Sandbox, calls policy.CodeCalls) (*Effective, error) {
	p := *s.policy
	p.Sandbox, p.CodeCalls = sb, calls
	data, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("encode effective policy: %w", err)
	}
	v, err := ast.ValueFromReader(strings.NewReader(string(data)))
	if err != nil {
		return nil, fmt.Errorf("convert effective policy: %w", err)
	}
	sum := sha256.Sum256(data)
	globs := make([]string, len(sb.FS.Deny))
	for i, g := range sb.FS.Deny {
		globs[i] = hostpath.ExpandHome(g, s.home)
	}
	deny, err := pathglob.Compile(globs)
	if err != nil {
		return nil, fmt.Errorf("sandbox.fs.deny: %w", err)
	}
	wpGlobs, wpEntries := writeProtectList(sb, s.home, s.installed)
	wp, err := pathglob.Compile(wpGlobs)
	if err != nil {
		return nil, fmt.Errorf("sandbox.fs.write_protect: %w", err)
	}
	// Validated by the policy package already; an error here is a policy
	// built around its validation.
	netAllow, err := nethost.ParseList("sandbox.net.allow", sb.Net.Allow, nethost.ParseAllow)
	if err != nil {
		return nil, err
	}
	netDeny, err := nethost.ParseList("sandbox.net.deny", sb.Net.Deny, nethost.ParsePattern)
	if err != nil {
		return nil, err
	}
	return &Effective{
		Revision:     s.revision,
		Policy:       p,
		Hash:         "sha256:" + hex.EncodeToString(sum[:]),
		JSON:         data,
		term:         ast.NewTerm(v),
		root:         s.root,
		rootTerm:     ast.StringTerm(s.root),
		deny:         deny,
		writeProtect: wp,
		writeEntries: wpEntries,
		globsTerms:   [2]*ast.Term{ast.ArrayTerm(stringTerms(deny.Globs())...), ast.ArrayTerm(stringTerms(wp.Globs())...)},
		netAllow:     netAllow,
		netDeny:      netDeny,
		runLanguages: ast.ArrayTerm(stringTerms(runner.LanguageNames())...),
		home:         s.home,
		snap:         s,
	}, nil
}

// withinCeilings returns the entries of allow that lie within a
// ceilings.net_hosts pattern (nethost.Pattern.Covers): the fact
// rego/constraints.rego judges an override's net.allow by. An entry that
// does not parse is within nothing.
func withinCeilings(allow, ceilings []string) []string {
	cs := make([]nethost.Pattern, 0, len(ceilings))
	for _, s := range ceilings {
		if c, err := nethost.ParseAllow(s); err == nil {
			cs = append(cs, c)
		}
	}
	out := []string{}
	for _, s := range allow {
		p, err := nethost.ParseAllow(s)
		if err != nil {
			continue
		}
		for _, c := range cs {
			if c.Covers(p) {
				out = append(out, s)
				break
			}
		}
	}
	return out
}

// violations runs rego/constraints.rego over a merged sandbox.
func (s *snapshot) violations(ctx context.Context, merged policy.Sandbox) ([]string, error) {
	in := map[string]any{
		"base": s.policy.Sandbox, "merged": merged, "ceilings": s.policy.Ceilings,
		"net_allow_within_ceilings": withinCeilings(merged.Net.Allow, s.policy.Ceilings.NetHosts),
	}
	data, err := json.Marshal(in)
	if err != nil {
		return nil, err
	}
	v, err := ast.ValueFromReader(strings.NewReader(string(data)))
	if err != nil {
		return nil, err
	}
	rs, err := s.constraints.Eval(ctx, oparegoInput(v))
	if err != nil {
		return nil, err
	}
	if len(rs) != 1 || len(rs[0].Expressions) != 1 {
		return nil, fmt.Errorf("%w: constraints result is undefined", ErrBadDecision)
	}
	set, ok := rs[0].Expressions[0].Value.([]any)
	if !ok {
		return nil, fmt.Errorf("%w: constraints.violations is %T, not a set of strings", ErrBadDecision, rs[0].Expressions[0].Value)
	}
	out := make([]string, 0, len(set))
	for _, x := range set {
		msg, ok := x.(string)
		if !ok {
			return nil, fmt.Errorf("%w: a violation is %T, not a string", ErrBadDecision, x)
		}
		out = append(out, msg)
	}
	return out, nil
}

// Query is one agent query: its sandbox override and, per policy revision,
// its effective policy. Safe for concurrent use.
type Query struct {
	ID       string
	engine   *Engine
	override []byte
	cached   atomic.Pointer[Effective]
}

// OpenQuery checks override (a partial sandbox section in JSON; nil for
// none) against the current policy and ceilings. A refused override returns
// an *OverrideError listing every violation.
func (e *Engine) OpenQuery(ctx context.Context, id string, override []byte) (*Query, error) {
	q := &Query{ID: id, engine: e, override: override}
	if _, err := q.Effective(ctx); err != nil {
		return nil, err
	}
	return q, nil
}

// Effective returns the query's effective policy under the current
// revision. After a reload it is recomputed; if the override no longer fits
// the new ceilings, the error is an *OverrideError and every decision of the
// query is a deny.
func (q *Query) Effective(ctx context.Context) (*Effective, error) {
	return q.effective(ctx, q.engine.cur.Load())
}

// effective is Effective under snapshot snap.
func (q *Query) effective(ctx context.Context, snap *snapshot) (*Effective, error) {
	if eff := q.cached.Load(); eff != nil && eff.Revision == snap.revision {
		return eff, nil
	}
	eff, err := snap.queryEffective(ctx, q.override)
	if err == nil {
		q.cached.Store(eff)
	}
	return eff, err
}

func (s *snapshot) queryEffective(ctx context.Context, override []byte) (*Effective, error) {
	if len(override) == 0 {
		return s.base, nil
	}
	merged, calls, err := s.policy.QueryOverride(override)
	if err != nil {
		var pe *policy.Error
		if errors.As(err, &pe) {
			return nil, &OverrideError{Violations: pe.Messages()}
		}
		return nil, err
	}
	v, err := s.violations(ctx, merged)
	if err != nil {
		return nil, fmt.Errorf("check override: %w", err)
	}
	if len(v) > 0 {
		return nil, &OverrideError{Violations: v}
	}
	return s.effective(merged, calls)
}
