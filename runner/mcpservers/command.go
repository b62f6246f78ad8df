package mcpservers

import (
	"context"
	"errors"
	"io"
	"os/exec"
	"syscall"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// commandTransport is the SDK's CommandTransport with the server's
// output read through boundedLines: it starts cmd, speaks MCP over its
// stdin and stdout, and at Close closes its stdin, waits stop for it to
// exit, then sends SIGTERM, waits stop again, then kills it (as the SDK's
// does, and as MCP's stdio transport says).
type commandTransport struct {
	cmd     *exec.Cmd
	stop    time.Duration
	bound   int
	dropped func(what string, n int)
}

func (t *commandTransport) Connect(ctx context.Context) (mcp.Connection, error) {
	stdout, err := t.cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	stdin, err := t.cmd.StdinPipe()
	if err != nil {
		return nil, err
	}
	if err := t.cmd.Start(); err != nil {
		return nil, err
	}
	// The connection is closed by closing stdin, not stdout. The SDK's
	// decoder may read ahead into the next line, hence twice the bound.
	return (&mcp.IOTransport{
		Reader:        io.NopCloser(newBoundedLines(stdout, t.bound, t.dropped)),
		Writer:        &stdinCloser{WriteCloser: stdin, cmd: t.cmd, stop: t.stop},
		MaxLineLength: 2 * t.bound,
	}).Connect(ctx)
}

// stdinCloser ends the server at Close.
type stdinCloser struct {
	io.WriteCloser
	cmd  *exec.Cmd
	stop time.Duration
}

func (s *stdinCloser) Close() error {
	if err := s.WriteCloser.Close(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- s.cmd.Wait() }()
	wait := func() (error, bool) {
		select {
		case err := <-exited:
			return err, true
		case <-time.After(s.stop):
			return nil, false
		}
	}
	if err, ok := wait(); ok {
		return err
	}
	if s.cmd.Process.Signal(syscall.SIGTERM) == nil {
		if err, ok := wait(); ok {
			return err
		}
	}
	if err := s.cmd.Process.Kill(); err != nil {
		return err
	}
	if err, ok := wait(); ok {
		return err
	}
	return errors.New("the server did not exit after SIGKILL")
}
