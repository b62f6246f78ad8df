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
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
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
	i, ok := slices.BinarySearchFunc(st.Tools, tool, func(t runner.ToolInfo, name string) int { return compare(t.Name, name) })
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

func compare(a, b string) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// server is one configured server: at most one live session, replaced
// when it ends.
type server struct {
	cfg    Config
	all    *Servers
	log    *slog.Logger
	client *mcp.Client

	mu         sync.Mutex
	cur        *session      // the live session, or nil
	connecting chan struct{} // closed when the connect in progress ends
	failures   int           // failed connects and short sessions in a row
	retryAt    time.Time     // no connect before
	lastErr    error         // why the last connect or session failed
	lastWhy    string        // lastErr in gatekeeper's words
	restarts   int           // sessions begun after the first
	closed     bool
}

// session is one connection to the server (one process of a stdio server).
type session struct {
	cs    *mcp.ClientSession
	cmd   *exec.Cmd // nil for HTTP
	began time.Time

	mu    sync.Mutex
	tools *runner.ServerTools // nil until listed, and after tools/list_changed
}

// session returns the live session, connecting when there is none. A
// caller whose ctx ends stops waiting; the connect goes on for the next.
func (srv *server) session(ctx context.Context) (*session, error) {
	srv.mu.Lock()
	switch {
	case srv.closed:
		srv.mu.Unlock()
		return nil, serverError(srv.cfg.Name, ErrClosed, "", nil)
	case srv.cur != nil:
		cur := srv.cur
		srv.mu.Unlock()
		return cur, nil
	}
	if srv.connecting == nil {
		if wait := time.Until(srv.retryAt); wait > 0 {
			err := serverError(srv.cfg.Name, ErrUnavailable, fmt.Sprintf("%s (%d failures in a row; next try in %s)", srv.lastWhy, srv.failures, wait.Round(time.Millisecond)), srv.lastErr)
			srv.mu.Unlock()
			return nil, err
		}
		srv.connecting = make(chan struct{})
		srv.all.wg.Add(1)
		go srv.connect(srv.connecting)
	}
	done := srv.connecting
	srv.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, serverError(srv.cfg.Name, ErrUnavailable, "still connecting when the call stopped waiting", ctx.Err())
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	if srv.cur == nil {
		if srv.closed {
			return nil, serverError(srv.cfg.Name, ErrClosed, "", nil)
		}
		return nil, serverError(srv.cfg.Name, ErrUnavailable, srv.lastWhy, srv.lastErr)
	}
	return srv.cur, nil
}

// connect starts a session, lists its tools, and installs it; done is
// closed when it has.
func (srv *server) connect(done chan struct{}) {
	defer srv.all.wg.Done()
	defer close(done)
	ctx, cancel := context.WithTimeout(srv.all.base, srv.all.opts.ConnectTimeout)
	defer cancel()
	sess, err := srv.dial(ctx)
	if err == nil {
		_, err = sess.list(ctx, srv.cfg)
		if err != nil {
			err = fmt.Errorf("list tools: %w", err)
			srv.teardown(sess)
		}
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	srv.connecting = nil
	if err != nil {
		srv.failed(srv.connectWhy(), err)
		srv.log.Warn("mcp server connect failed", "err", err, "failures", srv.failures, "retry_in", time.Until(srv.retryAt).Round(time.Millisecond))
		return
	}
	if srv.closed {
		srv.teardown(sess)
		return
	}
	srv.cur = sess
	attrs := []any{"transport", srv.transport(), "tools", len(sess.tools.Tools)}
	if sess.cmd != nil {
		attrs = append(attrs, "pid", sess.cmd.Process.Pid)
	}
	if srv.restarts > 0 {
		attrs = append(attrs, "restart", srv.restarts)
	}
	srv.restarts++
	srv.log.Info("mcp server connected", attrs...)
	srv.all.wg.Add(1)
	go srv.watch(sess)
}

func (srv *server) transport() string {
	if len(srv.cfg.Command) > 0 {
		return "stdio"
	}
	return "http"
}

// connectWhy words a failed connect for the program and the model.
func (srv *server) connectWhy() string {
	if srv.transport() == "stdio" {
		return "it could not be started"
	}
	return "it could not be reached"
}

// failed counts one more failure in a row, why in gatekeeper's words and
// err the raw error; srv.mu is held.
func (srv *server) failed(why string, err error) {
	srv.failures++
	srv.lastErr, srv.lastWhy = err, why
	delay := time.Duration(0)
	if srv.failures > 1 {
		delay = min(firstDelay<<min(srv.failures-2, 16), maxDelay)
	}
	srv.retryAt = time.Now().Add(delay)
}

// ended counts a session begun at began that ended: one more failure in a
// row, or the first one if it lasted minUptime; srv.mu is held.
func (srv *server) ended(began time.Time, why error) {
	if time.Since(began) >= minUptime {
		srv.failures = 0
	}
	srv.failed("its connection ended", fmt.Errorf("disconnected: %w", why))
}

// watch waits for the session to end by itself and drops it.
func (srv *server) watch(sess *session) {
	defer srv.all.wg.Done()
	err := sess.cs.Wait()
	if err == nil {
		err = errors.New("the session ended")
	}
	srv.drop(sess, err)
}

// drop replaces sess, if it is still the live session, with none: the next
// use connects again. It is called by watch and by a call that found the
// session broken, whichever comes first.
func (srv *server) drop(sess *session, why error) {
	srv.mu.Lock()
	if srv.cur != sess {
		srv.mu.Unlock()
		return
	}
	srv.cur = nil
	if !srv.closed {
		srv.ended(sess.began, why)
		srv.log.Warn("mcp server disconnected", "err", why, "failures", srv.failures, "retry_in", time.Until(srv.retryAt).Round(time.Millisecond))
	}
	srv.mu.Unlock()
	srv.all.wg.Add(1)
	go func() {
		defer srv.all.wg.Done()
		srv.teardown(sess)
	}()
}

// close ends the live session for good.
func (srv *server) close() {
	srv.mu.Lock()
	srv.closed = true
	sess := srv.cur
	srv.cur = nil
	srv.mu.Unlock()
	if sess != nil {
		srv.teardown(sess)
		srv.log.Info("mcp server stopped")
	}
}

// teardown closes the session: for a stdio server, its stdin is closed,
// then it is signalled and killed (by the SDK), and its process group is
// killed so that no child it started outlives it.
func (srv *server) teardown(sess *session) {
	err := sess.cs.Close()
	if sess.cmd != nil {
		// The group's leader has been reaped by Close; its children have not
		// (they are reparented), so the group id is still theirs.
		_ = syscall.Kill(-sess.cmd.Process.Pid, syscall.SIGKILL)
		srv.log.Debug("mcp server process ended", "pid", sess.cmd.Process.Pid, "state", sess.cmd.ProcessState, "err", err)
	}
}

func (srv *server) toolsChanged() {
	srv.mu.Lock()
	sess := srv.cur
	srv.mu.Unlock()
	if sess != nil {
		sess.mu.Lock()
		sess.tools = nil
		sess.mu.Unlock()
	}
}

// dial starts the server (stdio) or opens its session (HTTP) and
// initializes it.
func (srv *server) dial(ctx context.Context) (*session, error) {
	lookup := srv.all.opts.LookupEnv
	var t mcp.Transport
	var cmd *exec.Cmd
	if len(srv.cfg.Command) > 0 {
		env, err := resolveAll(srv.cfg.Env, "env", lookup)
		if err != nil {
			return nil, err
		}
		cmd = exec.Command(srv.cfg.Command[0], srv.cfg.Command[1:]...)
		for _, k := range inheritedEnv {
			if v, ok := lookup(k); ok {
				if _, set := env[k]; !set {
					cmd.Env = append(cmd.Env, k+"="+v)
				}
			}
		}
		for _, k := range sortedKeys(env) {
			cmd.Env = append(cmd.Env, k+"="+env[k])
		}
		if cmd.Env == nil {
			cmd.Env = []string{} // never the sidecar's environment
		}
		cmd.Stderr = &lineLogger{log: srv.log}
		// Its own process group, killed as a whole at teardown; killed too
		// if the sidecar dies.
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		t = &commandTransport{cmd: cmd, stop: srv.all.opts.StopTimeout, bound: srv.bound(), dropped: srv.dropped}
	} else {
		headers, err := resolveAll(srv.cfg.Headers, "header", lookup)
		if err != nil {
			return nil, err
		}
		t = &mcp.StreamableClientTransport{Endpoint: srv.cfg.URL, HTTPClient: srv.headerClient(headers), MaxEventSize: 2 * srv.bound()}
	}
	began := time.Now()
	cs, err := srv.client.Connect(ctx, t, nil)
	if err != nil {
		if cmd != nil && cmd.Process != nil {
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			_ = cmd.Wait()
		}
		return nil, err
	}
	return &session{cs: cs, cmd: cmd, began: began}, nil
}

// bound is how many bytes of one message the client reads.
func (srv *server) bound() int { return messageBound(srv.all.opts.MaxResultBytes) }

// dropped logs a message past the bound that was not read to its end.
func (srv *server) dropped(what string, n int) {
	srv.log.Warn("mcp server message larger than the bound, not read to its end", "what", what, "bytes_read", n, "bound", srv.bound())
}

// headerClient is an HTTP client that sends headers with every request,
// follows no redirect, so that the credentials go to the configured URL
// only, and reads at most srv.bound() bytes of an answer.
func (srv *server) headerClient(headers map[string]string) *http.Client {
	return &http.Client{
		Transport: headerTransport{base: http.DefaultTransport.(*http.Transport).Clone(), headers: headers, bound: srv.bound(), dropped: srv.dropped},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the MCP server redirected; redirects are not followed, so that its credentials go nowhere else")
		},
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	bound   int
	dropped func(what string, n int)
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	var id json.RawMessage
	if req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			raw, _ := io.ReadAll(io.LimitReader(body, int64(h.bound)))
			body.Close()
			id = requestID(raw)
		}
	}
	resp, err := h.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	// The answer to one request (its result, and any notifications
	// before it) is bounded as one stdio line is.
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if id != nil && resp.StatusCode == http.StatusOK && (ct == "application/json" || ct == "text/event-stream") {
		resp.Body = &boundedBody{body: resp.Body, id: id, sse: ct == "text/event-stream", bound: h.bound, dropped: h.dropped}
	} else {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: int64(h.bound), bound: h.bound}
	}
	return resp, err
}

// limitedBody fails a read past left bytes.
type limitedBody struct {
	io.ReadCloser
	left  int64
	bound int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the server's answer is larger than %d bytes", b.bound)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}

// tools returns the server's tools, listing them if the session has not
// yet or they changed.
func (srv *server) tools(ctx context.Context) (runner.ServerTools, error) {
	sess, err := srv.session(ctx)
	if err != nil {
		return runner.ServerTools{}, err
	}
	st, err := sess.list(ctx, srv.cfg)
	if err != nil {
		err = srv.callFailed(sess, "tools/list", err)
	}
	return st, err
}

// list returns the session's tools, listing them when not cached.
func (sess *session) list(ctx context.Context, cfg Config) (runner.ServerTools, error) {
	sess.mu.Lock()
	cached := sess.tools
	sess.mu.Unlock()
	if cached != nil {
		return *cached, nil
	}
	var tools []runner.ToolInfo
	for t, err := range sess.cs.Tools(ctx, nil) {
		if err != nil {
			return runner.ServerTools{}, err
		}
		info, err := toolInfo(t)
		if err != nil {
			return runner.ServerTools{}, err
		}
		tools = append(tools, info)
	}
	slices.SortFunc(tools, func(a, b runner.ToolInfo) int { return compare(a.Name, b.Name) })
	st := runner.ServerTools{Name: cfg.Name, Description: cfg.Description, Tools: tools}
	if st.Tools == nil {
		st.Tools = []runner.ToolInfo{}
	}
	canon, err := json.Marshal(st)
	if err != nil {
		return runner.ServerTools{}, err
	}
	sum := sha256.Sum256(canon)
	st.Hash = hex.EncodeToString(sum[:])
	sess.mu.Lock()
	sess.tools = &st
	sess.mu.Unlock()
	return st, nil
}

func toolInfo(t *mcp.Tool) (runner.ToolInfo, error) {
	info := runner.ToolInfo{Name: t.Name, Title: t.Title, Description: t.Description}
	var err error
	// The SDK holds a schema as decoded JSON (maps): marshalling it sorts
	// the keys, so the encoding is canonical.
	if info.InputSchema, err = json.Marshal(t.InputSchema); err != nil {
		return runner.ToolInfo{}, fmt.Errorf("tool %q: input schema: %w", t.Name, err)
	}
	if t.OutputSchema != nil {
		if info.OutputSchema, err = json.Marshal(t.OutputSchema); err != nil {
			return runner.ToolInfo{}, fmt.Errorf("tool %q: output schema: %w", t.Name, err)
		}
	}
	if a := t.Annotations; a != nil {
		info.ReadOnly = &a.ReadOnlyHint
		info.Idempotent = &a.IdempotentHint
		info.Destructive = a.DestructiveHint
		info.OpenWorld = a.OpenWorldHint
		if info.Title == "" {
			info.Title = a.Title
		}
	}
	return info, nil
}

// call makes one tools/call on the live session.
func (srv *server) call(ctx context.Context, tool string, arguments json.RawMessage) (json.RawMessage, error) {
	sess, err := srv.session(ctx)
	if err != nil {
		return nil, err
	}
	res, err := sess.cs.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: arguments})
	if err != nil {
		return nil, srv.callFailed(sess, tool, err)
	}
	out, err := json.Marshal(res)
	if err != nil {
		return nil, serverError(srv.cfg.Name, ErrRefused, fmt.Sprintf("its result for tool %q could not be encoded", tool), err)
	}
	return out, nil
}

// callFailed words err for the caller and drops the session when the
// error is its transport's (not the server's answer, nor the caller's
// deadline). what is the tool called, or "tools/list". A JSON-RPC error's
// message is the server's text: the caller gets its code.
func (srv *server) callFailed(sess *session, what string, err error) error {
	var rpc *jsonrpc.Error
	switch {
	case isTooLarge(err):
		return serverError(srv.cfg.Name, runner.ErrResultTooLarge, fmt.Sprintf("its answer to %s passed %d bytes, where reading stopped", what, srv.bound()), err)
	case errors.As(err, &rpc):
		return serverError(srv.cfg.Name, ErrRefused, fmt.Sprintf("it answered %s with JSON-RPC error %d", what, rpc.Code), err)
	case errors.Is(err, context.DeadlineExceeded), errors.Is(err, context.Canceled):
		return serverError(srv.cfg.Name, ErrNoAnswer, fmt.Sprintf("no answer to %s in time", what), err)
	}
	srv.drop(sess, err)
	return serverError(srv.cfg.Name, ErrUnavailable, fmt.Sprintf("its connection failed during %s; it is reconnected on its next use", what), err)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
