package mcpservers

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

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
