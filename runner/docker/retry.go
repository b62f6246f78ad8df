package docker

import (
	"context"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
)

// Bounds of the wait between two attempts of the retrier.
const (
	retryMin = time.Second
	retryMax = 30 * time.Second
)

// retrier removes again the containers and sandbox networks whose removal
// failed (the engine restarting, frozen past the call's timeout, or
// unreachable), until each is removed or found gone: a run the engine
// interrupted leaves nothing behind once the engine is back. Containers go
// first, so that a network's last endpoint is gone before the network.
// Its goroutine runs while anything is pending; close stops it after one
// last attempt.
type retrier struct {
	r        *Runner
	min, max time.Duration // the wait between attempts
	mu       sync.Mutex
	pending  map[retryItem]bool
	running  bool
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup
}

type retryItem struct {
	network bool // a sandbox network; else a container
	id      string
}

func newRetrier(r *Runner) *retrier {
	return &retrier{r: r, min: retryMin, max: retryMax, pending: map[retryItem]bool{}, stop: make(chan struct{})}
}

// add schedules the removal of a container (network false) or network.
func (q *retrier) add(network bool, id string) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.r.log.Error("not removed: the runner is closed", "id", short(id), "network", network)
		return
	}
	q.pending[retryItem{network: network, id: id}] = true
	if !q.running {
		q.running = true
		q.wg.Add(1)
		go q.loop()
	}
}

// count is the number of removals pending.
func (q *retrier) count() float64 {
	q.mu.Lock()
	defer q.mu.Unlock()
	return float64(len(q.pending))
}

// loop attempts the pending removals, waiting longer each time (1 s to
// 30 s), until none is left or close.
func (q *retrier) loop() {
	defer q.wg.Done()
	wait := q.min
	for {
		t := time.NewTimer(wait)
		select {
		case <-q.stop:
			t.Stop()
			return
		case <-t.C:
		}
		if q.attempt() == 0 {
			return
		}
		wait = min(2*wait, q.max)
	}
}

// attempt tries every pending removal once and returns how many are left
// pending; when none is, the loop ends (add starts another).
func (q *retrier) attempt() int {
	q.mu.Lock()
	var items []retryItem
	for it := range q.pending {
		items = append(items, it)
	}
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, network := range []bool{false, true} {
		for _, it := range items {
			if it.network != network {
				continue
			}
			var err error
			if network {
				err = q.r.cli.NetworkRemove(ctx, it.id)
			} else {
				err = q.r.cli.ContainerRemove(ctx, it.id, container.RemoveOptions{Force: true, RemoveVolumes: true})
			}
			if err == nil || cerrdefs.IsNotFound(err) {
				q.r.log.Info("removed what a failed removal left", "id", short(it.id), "network", network)
				q.mu.Lock()
				delete(q.pending, it)
				q.mu.Unlock()
			}
		}
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	n := len(q.pending)
	if n == 0 {
		q.running = false
	}
	return n
}

// close stops the loop, makes one last attempt and logs what is left.
func (q *retrier) close() {
	q.mu.Lock()
	if q.closed {
		q.mu.Unlock()
		return
	}
	q.closed = true
	close(q.stop)
	q.mu.Unlock()
	q.wg.Wait()
	if n := q.attempt(); n > 0 {
		q.r.log.Error("containers or networks could not be removed; the next start of this instance removes them", "count", n)
	}
}
