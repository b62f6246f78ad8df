package mcpservers

import (
	"errors"
	"testing"
	"time"
)

// TestBackoffGrowsWhileFailing: the first failure is retried at once, each
// further one in a row waits twice as long, up to maxDelay; a session that
// lasted minUptime starts the count again.
func TestBackoffGrowsWhileFailing(t *testing.T) {
	t.Parallel()
	srv := &server{}
	want := []time.Duration{0, firstDelay, 2 * firstDelay, 4 * firstDelay}
	for i, w := range want {
		before := time.Now()
		srv.failed("x", errors.New("down"))
		if got := srv.retryAt.Sub(before); got < w || got > w+time.Second {
			t.Errorf("failure %d: retry in %s, want %s", i+1, got, w)
		}
	}
	for range 20 {
		srv.failed("x", errors.New("down"))
	}
	if got := time.Until(srv.retryAt); got > maxDelay || got < maxDelay-time.Second {
		t.Errorf("after many failures: retry in %s, want %s", got, maxDelay)
	}

	// A session that lasted minUptime: one failure, retried at once; a
	// short one: one more in a row.
	srv.ended(time.Now().Add(-minUptime), errors.New("exited"))
	if srv.failures != 1 || time.Until(srv.retryAt) > 0 {
		t.Errorf("after a long session: failures %d, retry in %s", srv.failures, time.Until(srv.retryAt))
	}
	srv.ended(time.Now(), errors.New("exited"))
	if srv.failures != 2 || time.Until(srv.retryAt) < firstDelay/2 {
		t.Errorf("after a short session: failures %d, retry in %s", srv.failures, time.Until(srv.retryAt))
	}
}
