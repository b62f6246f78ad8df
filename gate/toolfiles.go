package gate

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/digest"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// ToolLister is the operator's MCP servers as the wrapper generator needs
// them: every server's tools, with a hash of their schemas. List returns
// by the time ctx ends, listing a server that is down, or did not answer
// by then, with its Err set rather than failing (as the sidecar's MCP
// client, runner/mcpservers, does): Wrappers bounds it with ListWait.
type ToolLister interface {
	List(ctx context.Context) ([]runner.ServerTools, error)
}

// WrapperOptions configure Wrappers; the zero value is usable.
type WrapperOptions struct {
	// Logger gets a line for each callable server left out of a run's
	// wrappers because it is down (default: discard).
	Logger *slog.Logger
	// Generate makes the files (default toolwrap.Generate); a test counts
	// its calls through it.
	Generate func([]runner.ServerTools) (map[string][]byte, error)
	// ListWait bounds each listing of the servers' tools (default
	// DefaultListWait).
	ListWait time.Duration
}

// DefaultListWait is how long a run's start (Files) and a query's tool
// description (Description) wait for the servers' tool lists. The servers
// are listed all at once, so it bounds each server on its own, and a
// connected server answers from its cache: it matters only for a server
// still connecting, whose start may take up to the MCP client's connect
// timeout (30 s). Such a server is left out of the run's wrappers and
// named unavailable, with the reason, in the description; its calls are
// still decided and then fail with that reason, and its connect goes on
// for the next run. Short, because the run (and the model behind it)
// waits this long before it starts, and a query's open_query answer
// before its decisions.
const DefaultListWait = 2 * time.Second

// wrapperCacheSize is how many trees Wrappers keeps: a sidecar's queries
// mostly share the policy's callable list, and a few narrow it.
const wrapperCacheSize = 4

// Wrappers makes the wrapper files of runs (runner.Spec.ToolFiles) from
// what the servers list, narrowed to the tools a run's effective policy
// lets its code call, and keeps the last few trees it made, keyed by the
// servers' schema hashes and the callable lists, so that a run under an
// unchanged policy and unchanged servers reuses the tree. The trees it
// returns are shared: nobody may change them. Safe for concurrent use.
type Wrappers struct {
	servers  ToolLister
	log      *slog.Logger
	generate func([]runner.ServerTools) (map[string][]byte, error)
	listWait time.Duration
	cache    *wrapperCache
}

// wrapperCache is the trees a Wrappers and its views (Over) share.
type wrapperCache struct {
	mu    sync.Mutex
	trees []wrapperTree // most recently used first
}

type wrapperTree struct {
	key   string
	files map[string][]byte
}

// NewWrappers returns the wrapper maker over servers.
func NewWrappers(servers ToolLister, opts WrapperOptions) *Wrappers {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Generate == nil {
		opts.Generate = toolwrap.Generate
	}
	if opts.ListWait <= 0 {
		opts.ListWait = DefaultListWait
	}
	return &Wrappers{servers: servers, log: opts.Logger, generate: opts.Generate, listWait: opts.ListWait, cache: &wrapperCache{}}
}

// Over returns a Wrappers that makes the files from what servers list
// instead, sharing w's cache (its key names each server's schema hash, so
// that trees of different servers never meet): the sidecar's view for one
// query whose client declared servers of its own process.
func (w *Wrappers) Over(servers ToolLister) *Wrappers {
	v := *w
	v.servers = servers
	return &v
}

// Files returns the wrapper files of a run under eff: for each server of
// its code_calls.callable, a module with the server's tools that a
// callable glob names (policy.MatchToolGlob, through CodeCalls.Matching),
// described as the policy's mcp_servers describes the server. A server
// that is down, or not listed within ListWait, or has no callable tool,
// gets no module; a down server is logged. The runtime is there even when no server is up, so that
// gatekeeper_tools.call to a down server fails at call time with kind
// server rather than at import. Files is nil when callable names no
// server. An error means ctx ended or the files could not be made; the
// run must not start.
func (w *Wrappers) Files(ctx context.Context, eff *Effective) (map[string][]byte, error) {
	servers, _, key, err := w.callable(ctx, eff)
	if err != nil || key == "" {
		return nil, err
	}
	if files, ok := w.lookup(key); ok {
		return files, nil
	}
	files, err := w.generate(servers)
	if err != nil {
		return nil, fmt.Errorf("generate the wrappers of the MCP tools: %w", err)
	}
	w.store(key, files)
	return files, nil
}

// Description returns the description of the sandboxed_code run tool for
// a query under eff: toolwrap.Describe over the servers whose modules its
// runs get (Files), so that the model is told of exactly the servers its
// code can import, and each callable server that is down or not listed
// within ListWait named unavailable with the reason; base when there are
// none.
func (w *Wrappers) Description(ctx context.Context, eff *Effective, base string) (string, error) {
	servers, down, _, err := w.callable(ctx, eff)
	if err != nil {
		return "", err
	}
	return toolwrap.Describe(base, append(servers, down...)), nil
}

// callable returns the servers of eff's code_calls.callable that are up,
// each with its tools that a callable glob names (none: left out), the
// ones that are down or were not listed within ListWait (Err set), and
// the key of the tree of the first; key is "" when callable names no
// server. It fails only when ctx ends or the servers cannot be listed at
// all.
func (w *Wrappers) callable(ctx context.Context, eff *Effective) (up, down []runner.ServerTools, key string, err error) {
	callable := eff.Policy.CodeCalls.Callable
	if len(callable) == 0 {
		return nil, nil, "", nil
	}
	listCtx, cancel := context.WithTimeout(ctx, w.listWait)
	listed, err := w.servers.List(listCtx)
	cancel()
	if err == nil {
		err = ctx.Err() // the caller's end, not the listing's bound
	}
	if err != nil {
		return nil, nil, "", fmt.Errorf("list the MCP servers' tools: %w", err)
	}
	byName := make(map[string]runner.ServerTools, len(listed))
	for _, st := range listed {
		byName[st.Name] = st
	}
	// The key names everything the tree is made from.
	type keyPart struct {
		Server, Description, Hash string
		Globs                     []string
	}
	var parts []keyPart
	for _, name := range slices.Sorted(maps.Keys(callable)) {
		st, ok := byName[name]
		if !ok {
			w.log.Warn("a callable MCP server is not configured: its tools get no wrappers", "mcp_server", name)
			continue
		}
		desc := eff.Policy.MCPServers[name].Description
		if desc == "" {
			// A server of the client's own process describes itself.
			desc = st.Description
		}
		if st.Err != nil {
			w.log.Warn("mcp server unavailable: its tools get no wrappers in this run, and its calls fail", "mcp_server", name, "err", st.Err)
			down = append(down, runner.ServerTools{Name: name, Description: desc, Err: st.Err})
			continue
		}
		parts = append(parts, keyPart{Server: name, Description: desc, Hash: st.Hash, Globs: callable[name]})
		var tools []runner.ToolInfo
		for _, t := range st.Tools {
			if len(eff.Policy.CodeCalls.Matching(name, t.Name)) > 0 {
				tools = append(tools, t)
			}
		}
		if len(tools) > 0 {
			up = append(up, runner.ServerTools{Name: name, Description: desc, Tools: tools})
		}
	}
	raw, err := json.Marshal(parts)
	if err != nil {
		return nil, nil, "", err
	}
	return up, down, digest.SHA256(raw), nil
}

// lookup returns the tree under key and makes it the most recently used.
func (w *Wrappers) lookup(key string) (map[string][]byte, bool) {
	c := w.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	for i, t := range c.trees {
		if t.key == key {
			copy(c.trees[1:i+1], c.trees[:i])
			c.trees[0] = t
			return t.files, true
		}
	}
	return nil, false
}

// store keeps files under key, dropping the least recently used tree
// beyond wrapperCacheSize. Two runs that missed at once both store: the
// second finds the key and only refreshes it.
func (w *Wrappers) store(key string, files map[string][]byte) {
	c := w.cache
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, t := range c.trees {
		if t.key == key {
			return
		}
	}
	c.trees = slices.Insert(c.trees, 0, wrapperTree{key: key, files: files})
	if len(c.trees) > wrapperCacheSize {
		c.trees[wrapperCacheSize] = wrapperTree{}
		c.trees = c.trees[:wrapperCacheSize]
	}
}
