// Package mcpservers is the sidecar's MCP client to the operator's MCP
// servers (the policy's mcp_servers), through the official Go SDK: it
// starts stdio servers and connects to streamable HTTP servers, lists
// their tools, and calls them for sandboxed code.
//
// Each server is on its own: a server that is down, slow or crashing makes
// only its own calls fail, with an error naming it; no lock is held across
// a call, and a connection in progress holds up only callers of that
// server, each no longer than its own context. A server connects on its
// first use (or on Connect); a session that ends (a stdio server that
// exits, an HTTP server that drops it) is replaced on the next use, after a
// backoff that grows while the server keeps failing. Every connect,
// disconnect and failure is logged. Close stops every server process and
// its process group.
//
// Credentials (Value.FromEnv, Value.FromFile) are read when a server
// connects and go only to that server: a stdio server's environment holds
// its Env and a few variables of the sidecar's (PATH, HOME, ...), never the
// sidecar's whole environment.
package mcpservers

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Errors a call may wrap: each is the Kind of a *runner.ServerError,
// whose text says which server failed and why in gatekeeper's words and
// never holds the raw error (see serverError).
var (
	// ErrUnknownServer: the policy configures no server of that name.
	ErrUnknownServer = errors.New("no such MCP server is configured")
	// ErrUnavailable: the server could not be reached or started, its
	// session ended during the call, or it was still connecting when the
	// caller stopped waiting.
	ErrUnavailable = errors.New("MCP server unavailable")
	// ErrClosed: Close was called.
	ErrClosed = errors.New("MCP servers closed")
	// ErrRefused: the server answered the request with a JSON-RPC error.
	ErrRefused = errors.New("MCP server refused the request")
	// ErrNoAnswer: the server did not answer before the caller's context
	// ended.
	ErrNoAnswer = errors.New("MCP server did not answer in time")
)

// serverError is the one constructor of the errors Servers returns: the
// server's name, a kind, and a reason in gatekeeper's words; cause, the
// raw error, is kept for the log and the audit line only.
func serverError(name string, kind error, reason string, cause error) *runner.ServerError {
	return &runner.ServerError{Server: name, Kind: kind, Reason: reason, Cause: cause}
}

// Defaults of Options.
const (
	DefaultConnectTimeout = 30 * time.Second
	DefaultCallTimeout    = 60 * time.Second
	// minUptime is how long a session must have lasted for its end not to
	// count as one more failure in a row.
	minUptime  = time.Minute
	firstDelay = 250 * time.Millisecond
	maxDelay   = 30 * time.Second
)

// Options configure Servers; the zero value is usable.
type Options struct {
	// Logger gets every connect, disconnect and failure (default: discard).
	Logger *slog.Logger
	// ConnectTimeout bounds starting a server and its initialize handshake
	// and first tools/list (default DefaultConnectTimeout).
	ConnectTimeout time.Duration
	// CallTimeout bounds a call whose context has no deadline (default
	// DefaultCallTimeout).
	CallTimeout time.Duration
	// LookupEnv reads the sidecar's environment for FromEnv values and the
	// inherited variables (default os.LookupEnv).
	LookupEnv func(string) (string, bool)
	// StopTimeout is how long a stdio server has to exit once its stdin is
	// closed, and again after SIGTERM, before it is killed (default 2s).
	StopTimeout time.Duration
	// MaxResultBytes bounds what the client reads of one call's result
	// (the policy's code_calls.max_result_bytes; default
	// DefaultMaxResultBytes): a message from a server is read up to
	// max(MaxResultBytes, 1 MiB) + 64 KiB. An answer past that fails its
	// call with an error of Kind runner.ErrResultTooLarge and is not read
	// to its end; the server and its session stay up (see boundedLines
	// and boundedBody). The sidecar holds at most a few times that bound
	// per call in flight (docs/SANDBOX.md gives the measured multiple).
	MaxResultBytes int64
}

// Servers is the sidecar's MCP client to every configured server. It is
// safe for concurrent use.
type Servers struct {
	opts    Options
	servers map[string]*server
	names   []string
	base    context.Context // ends at Close: bounds every connect
	stop    context.CancelFunc
	wg      sync.WaitGroup // connects and session teardowns in flight
}

// New returns the client for configs; it starts nothing (see Connect).
func New(configs []Config, opts Options) (*Servers, error) {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.ConnectTimeout <= 0 {
		opts.ConnectTimeout = DefaultConnectTimeout
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = DefaultCallTimeout
	}
	if opts.LookupEnv == nil {
		opts.LookupEnv = os.LookupEnv
	}
	if opts.StopTimeout <= 0 {
		opts.StopTimeout = 2 * time.Second
	}
	if opts.MaxResultBytes <= 0 {
		opts.MaxResultBytes = DefaultMaxResultBytes
	}
	s := &Servers{opts: opts, servers: map[string]*server{}}
	s.base, s.stop = context.WithCancel(context.Background())
	for _, c := range configs {
		switch {
		case c.Name == "":
			return nil, errors.New("an MCP server has no name")
		case s.servers[c.Name] != nil:
			return nil, fmt.Errorf("MCP server %q is configured twice", c.Name)
		case (len(c.Command) > 0) == (c.URL != ""):
			return nil, fmt.Errorf("MCP server %q: set a command or a url", c.Name)
		}
		srv := &server{cfg: c, all: s, log: opts.Logger.With("mcp_server", c.Name)}
		srv.client = mcp.NewClient(&mcp.Implementation{Name: "gatekeeper", Version: "1"}, &mcp.ClientOptions{
			ToolListChangedHandler: func(context.Context, *mcp.ToolListChangedRequest) { srv.toolsChanged() },
		})
		s.servers[c.Name] = srv
		s.names = append(s.names, c.Name)
	}
	slices.Sort(s.names)
	return s, nil
}

// Names returns the configured servers' names, sorted.
func (s *Servers) Names() []string { return slices.Clone(s.names) }

// Connect connects every server not yet connected, all at once, and
// returns each one's error (nil when it is up). It returns when all have
// answered or ctx ends.
func (s *Servers) Connect(ctx context.Context) map[string]error {
	errs := make(map[string]error, len(s.names))
	var mu sync.Mutex
	var wg sync.WaitGroup
	for _, name := range s.names {
		wg.Go(func() {
			_, err := s.servers[name].session(ctx)
			mu.Lock()
			errs[name] = err
			mu.Unlock()
		})
	}
	wg.Wait()
	return errs
}

// Tool returns what server says about tool; ok is false when the server is
// not configured or has no such tool. err is set when the server could not
// be reached.
func (s *Servers) Tool(ctx context.Context, server, tool string) (runner.ToolInfo, bool, error) {
	srv := s.servers[server]
	if srv == nil {
		return runner.ToolInfo{}, false, nil
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	st, err := srv.tools(ctx)
	if err != nil {
		return runner.ToolInfo{}, false, err
	}
	i, ok := slices.BinarySearchFunc(st.Tools, tool, func(t runner.ToolInfo, name string) int { return cmp.Compare(t.Name, name) })
	if !ok {
		return runner.ToolInfo{}, false, nil
	}
	return st.Tools[i], true, nil
}

// CallTool calls tool on server with arguments (a JSON object) and returns
// the MCP CallToolResult as JSON. A tool that ran and failed is a result
// with isError true, not an error. The call ends with ctx (or after
// Options.CallTimeout when ctx has no deadline); an error wraps
// ErrUnknownServer, ErrUnavailable, ErrClosed, the context's error, or the
// server's JSON-RPC error.
func (s *Servers) CallTool(ctx context.Context, server, tool string, arguments json.RawMessage) (json.RawMessage, error) {
	srv := s.servers[server]
	if srv == nil {
		return nil, serverError(server, ErrUnknownServer, "", nil)
	}
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	if len(arguments) == 0 {
		arguments = json.RawMessage("{}")
	}
	return srv.call(ctx, tool, arguments)
}

// List returns every server's tools, sorted by server name, once each has
// answered or ctx has ended, whichever comes first. The servers are listed
// all at once, so ctx's deadline bounds each server's listing on its own:
// a connected server answers from its cache, a server that is down, or
// still connecting when ctx ends, is listed with Err set (wrapping
// ErrUnavailable) while its connect goes on for later lists and calls,
// and one whose tools/list did not answer by then with that as Err. The
// error is always nil: ctx's end is in the Err of the servers it cut
// short, so that one slow server never costs the others their listing.
func (s *Servers) List(ctx context.Context) ([]runner.ServerTools, error) {
	ctx, cancel := s.deadline(ctx)
	defer cancel()
	out := make([]runner.ServerTools, len(s.names))
	var wg sync.WaitGroup
	for i, name := range s.names {
		wg.Go(func() {
			st, err := s.servers[name].tools(ctx)
			if err != nil {
				st = runner.ServerTools{Name: name, Description: s.servers[name].cfg.Description, Err: err}
			}
			out[i] = st
		})
	}
	wg.Wait()
	return out, nil
}

// Close ends every session and stops every stdio server with its process
// group, and waits for them. Calls after Close fail with ErrClosed.
func (s *Servers) Close() error {
	s.stop()
	for _, name := range s.names {
		s.servers[name].close()
	}
	s.wg.Wait()
	return nil
}

func (s *Servers) deadline(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, s.opts.CallTimeout)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
