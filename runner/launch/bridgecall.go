package launch

import (
	"bytes"
	"container/list"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Bridge is the runner's side of one run's bridge. It checks each request
// line against the run's runner.CallLimits itself, before the ToolCaller
// sees it: a line that is not a request is answered bad_request
// (runner.RuleBadRequest); past MaxCalls (lines of all outcomes count) or
// MaxArgumentBytes, limit naming the bound (runner.RuleMaxCalls, …). A
// call past MaxInFlight waits, in the order the calls came, for a call in
// flight to end; its Timeout counts from when the program made it, the
// wait included (a call whose timeout passes while it waits is answered
// timeout, runner.RuleTimeout). So at most MaxInFlight calls are in
// CallTool at once, and at most MaxCalls wait. Past MaxResultBytes (of
// the answer), limit; a call not answered within Timeout, timeout.
//
// Every call the bridge answers itself is a refusal: when the ToolCaller
// is a runner.RefusalRecorder, the first runner.MaxRefusalLines of a run
// are each handed to Refused before they are answered, and the rest are
// counted and handed to Omitted when the bridge closes. After
// runner.MaxRefusals refusals, every later call of the run is refused
// (runner.RuleMaxRefusals), counted, and never reaches the ToolCaller.
//
// It calls the ToolCaller concurrently, one goroutine per call in flight,
// and writes every answer, as a frame init reads, to the sandbox's
// standard input from one writer goroutine, in the order the answers come.
// Nothing it does blocks the output stream: answers wait in a queue for
// the writer, which init drains as it reads standard input.
//
// Close ends the bridge when the run ends: it cancels the calls in
// flight, refuses those still waiting (cancelled), drops their answers and
// every answer not yet written, and returns once its goroutines have
// ended.
type Bridge struct {
	caller   runner.ToolCaller
	recorder runner.RefusalRecorder // nil: the caller records no refusal
	limits   runner.CallLimits
	w        io.Writer
	ctx      context.Context
	cancel   context.CancelFunc
	calls    sync.WaitGroup // calls in flight and refusals being recorded
	done     chan struct{}  // the writer ended

	mu       sync.Mutex
	seq      int // request lines so far
	inFlight int
	waiting  list.List // of *waitingCall, in the order they came
	refusals int       // refusals so far
	recorded int       // refusals handed to Refused
	omitted  map[string]int
	closed   bool
	summed   bool // Omitted was called
	queue    [][]byte
	wake     chan struct{} // capacity 1: the queue has an answer
}

// waitingCall is a call waiting for a slot.
type waitingCall struct {
	call     uint64
	id       string
	tc       runner.NestedCall
	deadline time.Time
	timer    *time.Timer
	elem     *list.Element // nil once it left the queue
}

// NewBridge starts the bridge of a run with caller and limits, writing
// its answers to w (the sandbox's standard input, after Input.Write:
// init reads no answer before the whole input, and no call comes before
// the program starts). ctx bounds every call.
func NewBridge(ctx context.Context, caller runner.ToolCaller, limits runner.CallLimits, w io.Writer) *Bridge {
	ctx, cancel := context.WithCancel(ctx)
	b := &Bridge{caller: caller, limits: limits, w: w, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1), omitted: map[string]int{}}
	b.recorder, _ = caller.(runner.RefusalRecorder)
	go b.write()
	return b
}

// LineMax is the longest request line of the bridge's run (for
// NewCallDemux).
func (b *Bridge) LineMax() int64 { return lineMax(b.limits) }

// Calls returns how many request lines the program sent, all outcomes
// (runner.Result.ToolCalls).
func (b *Bridge) Calls() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.seq
}

// Close refuses the calls still waiting, cancels the calls in flight and
// drops every answer not yet written, then waits for the bridge's
// goroutines and hands the counted refusals to the RefusalRecorder: a
// ToolCaller returns when its ctx ends, and the writer once a write in
// progress returns (the caller closes w if the sandbox may have stopped
// reading). Close may be called again.
func (b *Bridge) Close() {
	b.mu.Lock()
	if !b.closed {
		b.closed = true
		b.queue = nil
		for e := b.waiting.Front(); e != nil; e = b.waiting.Front() {
			wc := b.leaveLocked(e)
			b.refuseLocked(wc.call, wc.id, wc.tc, &runner.ToolError{Kind: runner.ToolCancelled,
				Message: "the run ended while the call waited for a slot (" + runner.RuleMaxInFlight + ")"})
		}
	}
	b.mu.Unlock()
	b.cancel()
	b.calls.Wait()
	b.mu.Lock()
	var counts *runner.RefusalCounts
	if !b.summed && len(b.omitted) > 0 && b.recorder != nil {
		b.summed = true
		counts = &runner.RefusalCounts{ByRule: b.omitted, Closed: b.refusals > runner.MaxRefusals}
	}
	b.mu.Unlock()
	if counts != nil {
		b.recorder.Omitted(*counts)
	}
	<-b.done
}

// request is a request line (see docs/protocol.md's bridge section, and
// the code-mode contract): unknown fields are refused.
type request struct {
	ID        json.Number     `json:"id"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// answer is an answer line; ID is the request's id, verbatim digits.
type answer struct {
	ID     json.RawMessage `json:"id"`
	OK     bool            `json:"ok"`
	Result json.RawMessage `json:"result,omitempty"`
	Error  *answerError    `json:"error,omitempty"`
}

type answerError struct {
	Kind    string `json:"kind"`
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// idRE is an id the runtimes can hold exactly (JavaScript's safe integers).
var idRE = regexp.MustCompile(`^(0|[1-9][0-9]{0,14})$`)

// Call is CallDemux's onCall: it takes one request line init forwarded as
// call. It never blocks.
func (b *Bridge) Call(call uint64, line []byte, oversize bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return
	}
	b.seq++
	made := time.Now()
	lim := b.limits
	tc := runner.NestedCall{Seq: b.seq}
	id := "0"
	var te *runner.ToolError
	if oversize {
		if idRE.Match(line) {
			id = string(line)
		}
		te = &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxArgumentBytes,
			Message: fmt.Sprintf("the request is longer than %d bytes: its arguments may take at most %d bytes (%s)", b.LineMax(), lim.MaxArgumentBytes, runner.RuleMaxArgumentBytes)}
	} else {
		req, rid, err := parseRequest(line)
		id = rid
		if err != nil {
			te = &runner.ToolError{Kind: runner.ToolBadRequest, Rule: runner.RuleBadRequest, Message: "not a request (" + runner.RuleBadRequest + "): " + err.Error()}
		}
		tc.Server, tc.Tool, tc.Arguments = req.Server, req.Tool, req.Arguments
	}
	switch {
	case b.refusals >= runner.MaxRefusals:
		te = &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxRefusals,
			Message: fmt.Sprintf("this run's bridge is closed: it refused %d calls (%s), so it refuses every later one", runner.MaxRefusals, runner.RuleMaxRefusals)}
	case te != nil:
	case b.seq > lim.MaxCalls:
		te = &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxCalls,
			Message: fmt.Sprintf("this run may make at most %d calls (%s); the run goes on", lim.MaxCalls, runner.RuleMaxCalls)}
	case int64(len(tc.Arguments)) > lim.MaxArgumentBytes:
		te = &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxArgumentBytes,
			Message: fmt.Sprintf("the arguments take %d bytes, more than the %d allowed (%s)", len(tc.Arguments), lim.MaxArgumentBytes, runner.RuleMaxArgumentBytes)}
	}
	if te != nil {
		b.refuseLocked(call, id, tc, te)
		return
	}
	deadline := made.Add(lim.Timeout)
	if b.inFlight < lim.MaxInFlight && b.waiting.Len() == 0 {
		b.startLocked(call, id, tc, deadline)
		return
	}
	wc := &waitingCall{call: call, id: id, tc: tc, deadline: deadline}
	wc.elem = b.waiting.PushBack(wc)
	wc.timer = time.AfterFunc(lim.Timeout, func() { b.expire(wc) })
}

// startLocked puts a call in flight, with b.mu held.
func (b *Bridge) startLocked(call uint64, id string, tc runner.NestedCall, deadline time.Time) {
	b.inFlight++
	tc.InFlight = b.inFlight
	b.calls.Add(1)
	go b.run(call, id, tc, deadline)
}

// leaveLocked takes a waiting call out of the queue, with b.mu held.
func (b *Bridge) leaveLocked(e *list.Element) *waitingCall {
	wc := b.waiting.Remove(e).(*waitingCall)
	wc.elem = nil
	wc.timer.Stop()
	return wc
}

// expire answers a waiting call whose timeout passed before its turn.
func (b *Bridge) expire(wc *waitingCall) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed || wc.elem == nil {
		return // its turn came, or Close refused it
	}
	b.leaveLocked(wc.elem)
	b.refuseLocked(wc.call, wc.id, wc.tc, b.waitedTooLong())
}

func (b *Bridge) waitedTooLong() *runner.ToolError {
	return &runner.ToolError{Kind: runner.ToolTimeout, Rule: runner.RuleTimeout,
		Message: fmt.Sprintf("the call waited for one of the run's %d slots (%s) longer than its timeout, %v (%s), which counts from when the program made it", b.limits.MaxInFlight, runner.RuleMaxInFlight, b.limits.Timeout, runner.RuleTimeout)}
}

// nextLocked starts waiting calls while there are slots, with b.mu held.
func (b *Bridge) nextLocked() {
	for !b.closed && b.inFlight < b.limits.MaxInFlight && b.waiting.Len() > 0 {
		wc := b.leaveLocked(b.waiting.Front())
		if !time.Now().Before(wc.deadline) {
			b.refuseLocked(wc.call, wc.id, wc.tc, b.waitedTooLong())
			continue
		}
		b.startLocked(wc.call, wc.id, wc.tc, wc.deadline)
	}
}

// refuseLocked answers call with te, with b.mu held: one of the run's
// first MaxRefusalLines refusals is handed to the RefusalRecorder first
// (from a goroutine: Call never blocks), the others are counted.
func (b *Bridge) refuseLocked(call uint64, id string, tc runner.NestedCall, te *runner.ToolError) {
	b.refusals++
	if b.recorder == nil || b.recorded >= runner.MaxRefusalLines {
		key := te.Rule
		if key == "" {
			key = te.Kind
		}
		b.omitted[key]++
		b.answerLocked(call, id, nil, te)
		return
	}
	b.recorded++
	b.calls.Add(1)
	go func() {
		defer b.calls.Done()
		b.recorder.Refused(runner.ToolRefusal{Call: tc, Err: *te})
		b.mu.Lock()
		defer b.mu.Unlock()
		b.answerLocked(call, id, nil, te)
	}()
}

// run makes one call and queues its answer.
func (b *Bridge) run(call uint64, id string, tc runner.NestedCall, deadline time.Time) {
	defer b.calls.Done()
	ctx, cancel := context.WithDeadline(b.ctx, deadline)
	defer cancel()
	res := b.caller.CallTool(ctx, tc)
	var te *runner.ToolError
	switch {
	case b.ctx.Err() != nil:
		te = &runner.ToolError{Kind: runner.ToolCancelled, Message: "the run ended"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		te = &runner.ToolError{Kind: runner.ToolTimeout, Rule: runner.RuleTimeout,
			Message: fmt.Sprintf("the call took longer than %v (%s), counted from when the program made it", b.limits.Timeout, runner.RuleTimeout)}
	case res.Err != nil:
		te = res.Err
		if !knownKind(te.Kind) {
			te = &runner.ToolError{Kind: runner.ToolServer, Rule: te.Rule, Message: te.Message}
		}
	case !json.Valid(res.Result):
		te = &runner.ToolError{Kind: runner.ToolServer, Message: "the tool's result is not JSON"}
	case int64(len(res.Result)) > b.limits.MaxResultBytes:
		te = &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxResultBytes,
			Message: fmt.Sprintf("the result takes %d bytes, more than the %d allowed (%s)", len(res.Result), b.limits.MaxResultBytes, runner.RuleMaxResultBytes)}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.inFlight--
	if te != nil {
		b.answerLocked(call, id, nil, te)
	} else {
		b.answerLocked(call, id, res.Result, nil)
	}
	b.nextLocked()
}

func knownKind(k string) bool {
	switch k {
	case runner.ToolDenied, runner.ToolLimit, runner.ToolTimeout, runner.ToolServer, runner.ToolCancelled, runner.ToolBadRequest:
		return true
	}
	return false
}

// parseRequest decodes a request line; id is its id ("0" when it has no
// valid one).
func parseRequest(line []byte) (request, string, error) {
	var req request
	id := "0"
	dec := json.NewDecoder(bytes.NewReader(line))
	dec.UseNumber()
	dec.DisallowUnknownFields()
	err := dec.Decode(&req)
	if idRE.MatchString(req.ID.String()) {
		id = req.ID.String()
	}
	if err != nil {
		return req, id, fmt.Errorf("%v", err)
	}
	if dec.More() {
		return req, id, errors.New("more than one JSON value on the line")
	}
	switch {
	case !idRE.MatchString(req.ID.String()):
		return req, "0", errors.New(`"id" must be an integer from 0 to 999999999999999`)
	case req.Server == "":
		return req, id, errors.New(`"server" is missing`)
	case req.Tool == "":
		return req, id, errors.New(`"tool" is missing`)
	}
	if len(req.Arguments) == 0 || bytes.Equal(req.Arguments, []byte("null")) {
		req.Arguments = json.RawMessage("{}")
	} else if req.Arguments[0] != '{' {
		return req, id, errors.New(`"arguments" must be a JSON object`)
	}
	return req, id, nil
}

// answerLocked queues the answer to call, with b.mu held; after Close it
// drops it.
func (b *Bridge) answerLocked(call uint64, id string, result json.RawMessage, te *runner.ToolError) {
	if b.closed {
		return
	}
	a := answer{ID: json.RawMessage(id), OK: te == nil, Result: result}
	if te != nil {
		a.Error = &answerError{Kind: te.Kind, Rule: te.Rule, Message: te.Message}
	}
	body, err := json.Marshal(a) // compacts the result: one line
	if err != nil {
		body, _ = json.Marshal(answer{ID: json.RawMessage(id), Error: &answerError{Kind: runner.ToolServer, Message: "the answer could not be encoded"}})
	}
	frame := append([]byte("a "+strconv.FormatUint(call, 10)+" "+strconv.Itoa(len(body))+"\n"), body...)
	b.queue = append(b.queue, frame)
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// write is the writer goroutine: it writes the queued answers in order
// until Close; after a failed write it writes no more.
func (b *Bridge) write() {
	defer close(b.done)
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.wake:
		}
		for {
			b.mu.Lock()
			if b.closed || len(b.queue) == 0 {
				b.mu.Unlock()
				break
			}
			f := b.queue[0]
			b.queue = b.queue[1:]
			b.mu.Unlock()
			if _, err := b.w.Write(f); err != nil {
				<-b.ctx.Done()
				return
			}
		}
	}
}
