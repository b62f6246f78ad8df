package runner

import (
	"container/list"
	"context"
	"fmt"
	"sync"
)

// Backend is what a Queue runs Specs on (runner/docker's Runner, or
// another Queue).
type Backend interface {
	Run(ctx context.Context, spec Spec) (Result, error)
}

// Queue bounds how many runs of a Backend happen at once. Runs beyond the
// bound wait for a slot in the order they arrived (FIFO); a waiter whose
// context ends leaves the queue without running. A Queue is safe for
// concurrent use and is itself a Backend.
type Queue struct {
	backend Backend
	max     int

	mu      sync.Mutex
	running int
	waiting list.List // of chan struct{}, closed when handed a slot
}

// NewQueue returns a Queue running at most limit runs of b at once; a
// limit below 1 is taken as 1.
func NewQueue(b Backend, limit int) *Queue {
	return &Queue{backend: b, max: max(limit, 1)}
}

// Run waits for a slot, then runs spec on the backend and returns what it
// returned. If ctx ends while waiting, Run returns a Result with only RunID
// set and an error wrapping ctx's error; the backend is not called.
func (q *Queue) Run(ctx context.Context, spec Spec) (Result, error) {
	if err := q.acquire(ctx); err != nil {
		return Result{RunID: spec.RunID}, fmt.Errorf("waiting for a run slot: %w", err)
	}
	defer q.release()
	return q.backend.Run(ctx, spec)
}

// EndSession ends session id on the backend, when the backend keeps
// sessions (SessionEnder); it takes no slot.
func (q *Queue) EndSession(ctx context.Context, id string) error {
	if e, ok := q.backend.(SessionEnder); ok {
		return e.EndSession(ctx, id)
	}
	return nil
}

// Stats returns how many runs are running and how many wait.
func (q *Queue) Stats() (running, waiting int) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.running, q.waiting.Len()
}

func (q *Queue) acquire(ctx context.Context) error {
	q.mu.Lock()
	if q.running < q.max && q.waiting.Len() == 0 {
		q.running++
		q.mu.Unlock()
		return nil
	}
	if err := ctx.Err(); err != nil {
		q.mu.Unlock()
		return err
	}
	ready := make(chan struct{})
	elem := q.waiting.PushBack(ready)
	q.mu.Unlock()

	select {
	case <-ready:
		return nil
	case <-ctx.Done():
		q.mu.Lock()
		select {
		case <-ready:
			// Handed a slot just as ctx ended: pass it on.
			q.mu.Unlock()
			q.release()
		default:
			q.waiting.Remove(elem)
			q.mu.Unlock()
		}
		return ctx.Err()
	}
}

// release hands the slot to the longest waiter, or frees it.
func (q *Queue) release() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if front := q.waiting.Front(); front != nil {
		q.waiting.Remove(front)
		close(front.Value.(chan struct{}))
		return // the slot passes on: running stays the same
	}
	q.running--
}
