package bench

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"sync"
	"sync/atomic"
	"time"
)

// Worker does one decision and reports whether the answer was the
// expected one. Each worker owns one connection and is used by one
// goroutine.
type Worker func() error

// GatekeeperWorkers dials n connections to the sidecar, opens a query on
// each and returns workers sending frame (a decide for that query, built by
// mkFrame) and checking that the reply holds want. close closes them all.
func GatekeeperWorkers(ctx context.Context, s *Sidecar, n int, mkFrame func(queryID string) []byte, want []byte) (ws []Worker, close func(), err error) {
	var clients []*Client
	close = func() {
		for _, c := range clients {
			c.Close()
		}
	}
	for range n {
		c, err := Dial(ctx, s.Socket, s.Token)
		if err != nil {
			close()
			return nil, nil, err
		}
		clients = append(clients, c)
		q, _, err := c.OpenQuery(nil)
		if err != nil {
			close()
			return nil, nil, err
		}
		frame := mkFrame(q)
		ws = append(ws, func() error {
			reply, err := c.RoundTrip(frame)
			if err != nil {
				return err
			}
			if !bytes.Contains(reply, want) {
				return fmt.Errorf("unexpected reply %.300s", reply)
			}
			return nil
		})
	}
	return ws, close, nil
}

// OPAWorkers returns n workers, each with its own kept-alive connection to
// OPA's REST server, posting body to /v1/data/gatekeeper/decision and
// checking that the reply holds want.
func OPAWorkers(socket string, n int, body, want []byte) (ws []Worker, close func()) {
	var clients []*http.Client
	for range n {
		hc := UnixHTTPClient(socket, 1)
		clients = append(clients, hc)
		ws = append(ws, func() error {
			resp, err := hc.Post("http://opa/v1/data/gatekeeper/decision", "application/json", bytes.NewReader(body))
			if err != nil {
				return err
			}
			reply, err := io.ReadAll(resp.Body)
			resp.Body.Close()
			if err != nil {
				return err
			}
			if resp.StatusCode != http.StatusOK || !bytes.Contains(reply, want) {
				return fmt.Errorf("opa: HTTP %d %.300s", resp.StatusCode, reply)
			}
			return nil
		})
	}
	return ws, func() {
		for _, hc := range clients {
			hc.CloseIdleConnections()
		}
	}
}

// Slice runs every worker in a loop, each one request at a time, for d,
// and returns how many requests completed and the time from the common
// start until the last one finished. The first error stops the slice.
func Slice(workers []Worker, d time.Duration) (int64, time.Duration, error) {
	var (
		count    atomic.Int64
		wg       sync.WaitGroup
		errOnce  sync.Once
		firstErr error
		failed   atomic.Bool
	)
	begin := make(chan struct{})
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-begin
			deadline := time.Now().Add(d)
			for time.Now().Before(deadline) && !failed.Load() {
				if err := w(); err != nil {
					errOnce.Do(func() { firstErr = err })
					failed.Store(true)
					return
				}
				count.Add(1)
			}
		}()
	}
	t0 := time.Now()
	close(begin)
	wg.Wait()
	elapsed := time.Since(t0)
	if firstErr != nil {
		return 0, elapsed, firstErr
	}
	if count.Load() == 0 {
		return 0, elapsed, errors.New("no request completed")
	}
	return count.Load(), elapsed, nil
}
