package docker

import (
	"context"
	"sync"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"
)

// Bounds of the wait between two attempts of the retrier, and the time a
// lost create is looked for (see retrier.lost).
const (
	retryMin  = time.Second
	retryMax  = 30 * time.Second
	lostAfter = 5 * time.Second
)

// LabelCreate is on every container a Runner creates, with a value of its
// own: after a create whose answer was lost (the engine stopping under
// it), the container it may have made is found by this label.
const LabelCreate = "gatekeeper.create"

// retrier removes what a fault of the engine left behind, until it is
// gone: containers and sandbox networks whose removal failed (the engine
// restarting, frozen past the call's timeout, or unreachable), and those
// a create may have made although its answer was lost (the engine stopped
// after it created the container, before it answered). Containers go
// first, so that a network's last endpoint is gone before the network.
// Its goroutine runs while anything is pending; close stops it after one
// last attempt.
type retrier struct {
	r        *platform
	min, max time.Duration // the wait between attempts
	lost     time.Duration // how long after a lost create it is looked for again
	mu       sync.Mutex
	pending  map[retryItem]*lookup
	running  bool
	closed   bool
	stop     chan struct{}
	wg       sync.WaitGroup
}

// retryItem is a removal to retry: of a container or network by id, or,
// with byLabel, of whatever container or network carries the label (key
// = id) a lost create gave it.
type retryItem struct {
	network bool
	byLabel string // LabelCreate or LabelNetworkID; "" for an id
	id      string
}

// lookup counts the lists that found nothing left of a lost create: it
// is done after one at least lost after the first, so that a create the
// engine still finishes after a freeze is caught.
type lookup struct {
	first time.Time // of a list that found nothing
}

func newRetrier(r *platform) *retrier {
	return &retrier{r: r, min: retryMin, max: retryMax, lost: lostAfter, pending: map[retryItem]*lookup{}, stop: make(chan struct{})}
}

// add schedules the removal of a container (network false) or network by
// id.
func (q *retrier) add(network bool, id string) { q.put(retryItem{network: network, id: id}) }

// addLost schedules the removal of whatever container (network false) or
// network a create whose answer was lost made: it carries label = value.
func (q *retrier) addLost(network bool, label, value string) {
	q.put(retryItem{network: network, byLabel: label, id: value})
}

func (q *retrier) put(it retryItem) {
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		q.r.log.Error("not removed: the runner is closed", "id", short(it.id), "network", it.network, "label", it.byLabel)
		return
	}
	q.pending[it] = &lookup{}
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
		if q.attempt(false) == 0 {
			return
		}
		wait = min(2*wait, q.max)
	}
}

// attempt tries every pending removal once and returns how many are left
// pending; when none is, the loop ends (add starts another). With final,
// a lost create's lookup is done after one list that finds nothing.
func (q *retrier) attempt(final bool) int {
	q.mu.Lock()
	items := make(map[retryItem]*lookup, len(q.pending))
	for it, l := range q.pending {
		items[it] = l
	}
	q.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), cleanupTimeout)
	defer cancel()
	for _, network := range []bool{false, true} {
		for it, l := range items {
			if it.network != network {
				continue
			}
			var done bool
			if it.byLabel == "" {
				done = q.remove(ctx, network, it.id)
			} else {
				done = q.sweep(ctx, it, l, final)
			}
			if done {
				q.r.log.Info("removed what a fault of the engine left", "id", short(it.id), "network", network, "label", it.byLabel)
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

// remove removes a container or network by id; true once it is gone.
func (q *retrier) remove(ctx context.Context, network bool, id string) bool {
	var err error
	if network {
		err = q.r.cli.NetworkRemove(ctx, id)
	} else {
		err = q.r.cli.ContainerRemove(ctx, id, container.RemoveOptions{Force: true, RemoveVolumes: true})
	}
	return err == nil || cerrdefs.IsNotFound(err)
}

// sweep removes what carries it's label; true once a list found nothing
// left, at least q.lost after the first such list (or at once if final).
func (q *retrier) sweep(ctx context.Context, it retryItem, l *lookup, final bool) bool {
	label := filters.NewArgs(filters.Arg("label", it.byLabel+"="+it.id))
	var ids []string
	if it.network {
		list, err := q.r.cli.NetworkList(ctx, network.ListOptions{Filters: label})
		if err != nil {
			return false
		}
		for _, n := range list {
			ids = append(ids, n.ID)
		}
	} else {
		list, err := q.r.cli.ContainerList(ctx, container.ListOptions{All: true, Filters: label})
		if err != nil {
			return false
		}
		for _, c := range list {
			ids = append(ids, c.ID)
		}
	}
	left := false
	for _, id := range ids {
		left = !q.remove(ctx, it.network, id) || left
	}
	if left || len(ids) > 0 {
		return false // list again: the next one must find nothing
	}
	if final {
		return true
	}
	if l.first.IsZero() {
		l.first = time.Now()
		return false
	}
	return time.Since(l.first) >= q.lost
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
	if n := q.attempt(true); n > 0 {
		q.r.log.Error("containers or networks could not be removed; the next start of this instance removes them", "count", n)
	}
}
