package egress

import (
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"
)

// activity is the idle clock shared by the two sides of one tunnel or
// forwarded request: traffic in either direction resets it.
type activity struct {
	idle time.Duration
	last atomic.Int64 // unix nanoseconds of the last byte moved
}

func newActivity(idle time.Duration) *activity {
	a := &activity{idle: idle}
	a.touch()
	return a
}

func (a *activity) touch() { a.last.Store(time.Now().UnixNano()) }

// deadline is when the connection counts as idle.
func (a *activity) deadline() time.Time { return time.Unix(0, a.last.Load()).Add(a.idle) }

// meteredConn counts and caps the bytes through a connection and enforces
// the shared idle clock with deadlines. Reads and writes may run
// concurrently (one reader, one writer), as on net.Conn.
type meteredConn struct {
	net.Conn
	act *activity
	// max caps read and written bytes separately; 0 means no cap.
	max           int64
	read, written atomic.Int64
}

// Read reads at most the bytes left under max; once max bytes have been
// read it fails with errByteLimit. With no traffic either way for the idle
// time it fails with errIdleTimeout.
func (c *meteredConn) Read(p []byte) (int, error) {
	if c.max > 0 {
		left := c.max - c.read.Load()
		if left <= 0 {
			return 0, errByteLimit
		}
		if int64(len(p)) > left {
			p = p[:left]
		}
	}
	for {
		if err := c.Conn.SetReadDeadline(c.act.deadline()); err != nil {
			return 0, err
		}
		n, err := c.Conn.Read(p)
		if n > 0 {
			c.read.Add(int64(n))
			c.act.touch()
		}
		if n == 0 && isTimeout(err) {
			if time.Now().Before(c.act.deadline()) {
				continue // the other direction moved meanwhile
			}
			return 0, errIdleTimeout
		}
		return n, err
	}
}

// Write writes p, or as much of it as max allows and then fails with
// errByteLimit. A peer that accepts nothing for the idle time makes it fail
// with errIdleTimeout.
func (c *meteredConn) Write(p []byte) (int, error) {
	var cut bool
	if c.max > 0 {
		left := max(c.max-c.written.Load(), 0)
		if int64(len(p)) > left {
			p, cut = p[:left], true
		}
	}
	total := 0
	for len(p) > 0 {
		if err := c.Conn.SetWriteDeadline(time.Now().Add(c.act.idle)); err != nil {
			return total, err
		}
		n, err := c.Conn.Write(p)
		total += n
		p = p[n:]
		if n > 0 {
			c.written.Add(int64(n))
			c.act.touch()
		}
		if err != nil {
			if isTimeout(err) {
				if n > 0 {
					continue
				}
				return total, errIdleTimeout
			}
			return total, err
		}
	}
	if cut {
		return total, errByteLimit
	}
	return total, nil
}

// closeWrite half-closes c. It never closes c outright: a tunnel must
// know who closed a connection, and only tunnel's closeBoth may.
func (c *meteredConn) closeWrite() error {
	cw, ok := c.Conn.(interface{ CloseWrite() error })
	if !ok {
		return errors.New("connection cannot half-close")
	}
	return cw.CloseWrite()
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// tunnel copies bytes both ways between client and upstream until both
// directions have ended. An end of stream is passed on as a half-close; an
// error in either direction closes both connections. It returns the error
// that ended the tunnel, or nil when it ended cleanly, which includes the
// client resetting its connection (clients routinely do, closing TLS). The
// goroutine it starts has ended when it returns.
func tunnel(client, upstream *meteredConn) error {
	var closed atomic.Bool // set before tunnel itself closes both sides
	closeBoth := func() {
		closed.Store(true)
		client.Conn.Close()
		upstream.Conn.Close()
	}
	run := func(dst, src *meteredConn, srcIsClient bool) error {
		onSrc, err := pipe(dst, src)
		switch {
		case err == nil:
			return nil
		case errors.Is(err, net.ErrClosed) && closed.Load():
			return nil // the other direction ended the tunnel
		}
		closeBoth()
		if onSrc == srcIsClient && clientGone(err) {
			return nil
		}
		return err
	}
	down := make(chan error, 1)
	go func() { down <- run(client, upstream, false) }()
	errUp := run(upstream, client, true)
	errDown := <-down
	if errUp != nil {
		return errUp
	}
	return errDown
}

// pipe copies src to dst until src ends, then half-closes dst. It returns
// the error that stopped it, if any, and whether it came from src.
func pipe(dst, src *meteredConn) (onSrc bool, err error) {
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			if _, werr := dst.Write(buf[:n]); werr != nil {
				return false, werr
			}
		}
		if errors.Is(err, io.EOF) {
			// A failed half-close is dst's error: typically the peer
			// has already reset the connection (ENOTCONN).
			if cerr := dst.closeWrite(); cerr != nil {
				return false, cerr
			}
			return true, nil
		}
		if err != nil {
			return true, err
		}
	}
}

// clientGone reports whether err is a peer resetting the connection or
// having closed it, which from the client is just a way of hanging up.
func clientGone(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE) || errors.Is(err, syscall.ENOTCONN)
}
