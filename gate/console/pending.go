package console

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

// pendingSet holds the asks on nested calls that wait for a client's
// answer now, as the server tells them (server.ApprovalObserver), and
// wakes the live streams on each change; the streams send the whole set
// as a `pending` event. Safe for concurrent use.
//
// A wait is state, not a record, so it is kept here and not written to
// the audit log: the log already gets one line per call, with the answer
// (the code_call line's approval), and a line per request would make two
// lines of one call, which every reader that counts lines per call, and
// `tail`, would have to pair up again. Here a wait shows while it lasts
// and goes when it ends, and the answered line that follows in the stream
// says how it ended.
type pendingSet struct {
	mu      sync.Mutex
	byID    map[string]server.PendingApproval
	changed chan struct{} // closed and replaced on each change
}

func newPendingSet() *pendingSet {
	return &pendingSet{byID: map[string]server.PendingApproval{}, changed: make(chan struct{})}
}

// ApprovalWaiting implements server.ApprovalObserver.
func (p *pendingSet) ApprovalWaiting(a server.PendingApproval) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.byID[a.ID] = a
	p.wake()
}

// ApprovalDone implements server.ApprovalObserver.
func (p *pendingSet) ApprovalDone(id string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, ok := p.byID[id]; ok {
		delete(p.byID, id)
		p.wake()
	}
}

// wake tells the streams; p.mu is held.
func (p *pendingSet) wake() {
	close(p.changed)
	p.changed = make(chan struct{})
}

// PendingView is a waiting ask as the console shows it: WaitedMS is how
// long it has waited when the event was sent.
type PendingView struct {
	server.PendingApproval
	WaitedMS int64 `json:"waited_ms"`
}

// snapshot returns the event data of the set now, oldest ask first, and
// the channel closed at its next change.
func (p *pendingSet) snapshot(now time.Time) ([]byte, <-chan struct{}) {
	p.mu.Lock()
	defer p.mu.Unlock()
	list := make([]PendingView, 0, len(p.byID))
	for _, a := range p.byID {
		list = append(list, PendingView{PendingApproval: a, WaitedMS: max(0, now.Sub(a.AskedAt).Milliseconds())})
	}
	slices.SortFunc(list, func(a, b PendingView) int {
		if c := a.AskedAt.Compare(b.AskedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	data, _ := json.Marshal(map[string]any{"pending": list})
	return data, p.changed
}
