package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"sync"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// The bridge carries the nested calls of a run with tools (runner.Spec.Tools)
// from the program to the runner and their answers back, with no network:
//
//	program --JSON lines on ToolsDir/bridge.sock--> init (PID 1)
//	  --call frames on the sandbox's standard output--> CallDemux --> Bridge
//	  --runner.ToolCaller.CallTool--> the gate
//	Bridge --answer frames on the sandbox's standard input--> init --> the connection
//
// init's side is initBridge. The runner's side: CallDemux lifts the call
// frames out of standard output (between EndMarks and the output cap),
// and Bridge checks each call against runner.CallLimits, calls the
// ToolCaller and writes the answers.
//
// Why frames on the shared standard output and not the program's output
// relayed through init: a frame is one write(2) of at most PIPE_BUF
// bytes, which the kernel (and gVisor's) puts in a pipe whole, so the
// program's own writes to the stream can fall before or after a frame but
// never inside it; the program's output keeps its direct path (no copy
// through PID 1, no new way to stall it), and the only new thing the
// runner parses is a frame that starts with the run's secret tag. A
// request line longer than a frame is cut into numbered pieces, each its
// own frame, which init writes one after another and CallDemux joins.

// ToolsDir is $GATEKEEPER_TOOLS in every sandbox: outside /workspace (so
// never returned or snapshotted), on the /tmp tmpfs. In a run with tools
// init makes it (0700) before the program starts and puts there the
// wrapper files (runner.Spec.ToolFiles, read-only) and bridge.sock.
const ToolsDir = TmpDir + "/.gatekeeper"

// BridgeSocket is the unix socket init serves in a run with tools.
const BridgeSocket = ToolsDir + "/bridge.sock"

const (
	// callLead starts every call frame init writes, followed by the run's
	// tag and a space.
	callLead = "\x1egatekeeper-call "
	// callFrameMax is PIPE_BUF: a write(2) of at most this many bytes to
	// a pipe is atomic.
	callFrameMax = 4096
	// callPieceMax is the most bytes of a request line one frame carries;
	// the rest of callFrameMax is the frame's lead, tag and fields.
	callPieceMax = callFrameMax - 64
	// requestOverhead is what a request line may hold beyond its
	// arguments (id, server, tool, the JSON around them).
	requestOverhead = 4096
)

// lineMax is the longest request line init forwards for limits: longer
// lines are refused inside the sandbox, unread.
func lineMax(l runner.CallLimits) int64 {
	return max(l.MaxArgumentBytes, 0) + requestOverhead
}

// CallDemux is standard output's filter in a run with tools: it passes
// the program's output on to out unchanged and hands each request line
// init forwarded (whole, joined from its frames) to onCall, with init's
// number for it; oversize is set for a line init refused as too long
// (line then holds only the request's id, if init found one) and for one
// longer than maxLine. It holds back a tail that may be the start of a
// frame, at most one frame, and at most maxLine bytes of a line being
// joined. Bytes that look like a frame but do not start with the tag, or
// are malformed, are output. Writes come from one goroutine; Flush must
// follow the last write. onCall is called from Write and must not block.
type CallDemux struct {
	lead    []byte // callLead + tag + " "
	out     io.Writer
	onCall  func(call uint64, line []byte, oversize bool)
	maxLine int64
	held    []byte
	cur     uint64 // the call whose pieces are being joined; 0: none
	line    []byte
	tooLong bool
	// FrameBytes counts the bytes of the frames taken out of the stream.
	FrameBytes int64
}

// NewCallDemux returns the filter of the run with tag, whose lines are at
// most maxLine bytes (lineMax of the run's limits: see Bridge.LineMax).
func NewCallDemux(tag string, maxLine int64, out io.Writer, onCall func(call uint64, line []byte, oversize bool)) *CallDemux {
	return &CallDemux{lead: []byte(callLead + tag + " "), out: out, onCall: onCall, maxLine: maxLine}
}

// Write never fails, so that the stream keeps draining.
func (d *CallDemux) Write(p []byte) (int, error) {
	data := p
	if len(d.held) > 0 {
		data = append(d.held, p...)
		d.held = nil
	}
	for {
		i := bytes.Index(data, d.lead)
		if i < 0 {
			break
		}
		d.pass(data[:i])
		n, st := d.frame(data[i+len(d.lead):])
		switch st {
		case frameShort:
			d.held = append([]byte(nil), data[i:]...)
			return len(p), nil
		case frameBad:
			d.pass(data[i : i+1])
			data = data[i+1:]
		default:
			d.FrameBytes += int64(len(d.lead) + n)
			data = data[i+len(d.lead)+n:]
		}
	}
	keep := partialLead(data, d.lead)
	d.pass(data[:len(data)-keep])
	if keep > 0 {
		d.held = append([]byte(nil), data[len(data)-keep:]...)
	}
	return len(p), nil
}

// Flush passes on a held tail once the stream ended (a frame cut off is
// output: init never writes one).
func (d *CallDemux) Flush() {
	d.pass(d.held)
	d.held = nil
}

func (d *CallDemux) pass(b []byte) {
	if len(b) > 0 {
		_, _ = d.out.Write(b)
	}
}

type frameState int

const (
	frameDone frameState = iota
	frameShort
	frameBad
)

// frame reads one frame's body after its lead and tag,
// "<call> <c|e|x> <n>\n" and n bytes and "\n", and acts on it; n is the
// bytes it took.
func (d *CallDemux) frame(b []byte) (int, frameState) {
	call, flag, size, head, st := parseFrameHead(b)
	if st != frameDone {
		return 0, st
	}
	end := head + size
	if len(b) < end+1 {
		if len(d.lead)+end+1 > callFrameMax {
			return 0, frameBad
		}
		return 0, frameShort
	}
	if b[end] != '\n' {
		return 0, frameBad
	}
	piece := b[head:end]
	switch flag {
	case 'x':
		d.reset()
		d.onCall(call, append([]byte(nil), piece...), true)
	default:
		if d.cur != call {
			d.reset() // init writes a line's pieces one after another
			d.cur = call
		}
		if int64(len(d.line)+len(piece)) > d.maxLine {
			d.tooLong = true
			d.line = d.line[:0]
		} else if !d.tooLong {
			d.line = append(d.line, piece...)
		}
		if flag == 'e' {
			line, tooLong := d.line, d.tooLong
			d.cur, d.line, d.tooLong = 0, nil, false
			if tooLong {
				line = nil
			}
			d.onCall(call, line, tooLong)
		}
	}
	return end + 1, frameDone
}

func (d *CallDemux) reset() { d.cur, d.line, d.tooLong = 0, nil, false }

// parseFrameHead parses "<call> <c|e|x> <n>\n": call a positive decimal
// of at most 15 digits, n at most callPieceMax; head is the header's
// length.
func parseFrameHead(b []byte) (call uint64, flag byte, size, head int, st frameState) {
	nl := bytes.IndexByte(b, '\n')
	if nl < 0 {
		if len(b) > 32 {
			return 0, 0, 0, 0, frameBad
		}
		return 0, 0, 0, 0, frameShort
	}
	f := bytes.Split(b[:nl], []byte(" "))
	if len(f) != 3 || len(f[1]) != 1 || !bytes.Contains([]byte("cex"), f[1]) {
		return 0, 0, 0, 0, frameBad
	}
	c, ok := decimal(f[0], 15)
	if !ok || c == 0 {
		return 0, 0, 0, 0, frameBad
	}
	n, ok := decimal(f[2], 4)
	if !ok || n > callPieceMax {
		return 0, 0, 0, 0, frameBad
	}
	return c, f[1][0], int(n), nl + 1, frameDone
}

// decimal parses at most digits decimal digits, without a sign or a
// leading zero (but "0").
func decimal(b []byte, digits int) (uint64, bool) {
	if len(b) == 0 || len(b) > digits || (len(b) > 1 && b[0] == '0') {
		return 0, false
	}
	var n uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, true
}

// Bridge is the runner's side of one run's bridge. It checks each request
// line against the run's runner.CallLimits itself, before the ToolCaller
// sees it: a line that is not a request is answered bad_request; past
// MaxCalls (lines of all outcomes count), MaxInFlight, MaxArgumentBytes or
// (of the answer) MaxResultBytes, limit naming the bound (runner.RuleMaxCalls,
// …); a call not answered within Timeout, timeout (its ctx's deadline).
// It calls the ToolCaller concurrently, one goroutine per call in flight,
// and writes every answer, as a frame init reads, to the sandbox's
// standard input from one writer goroutine, in the order the answers come.
// Nothing it does blocks the output stream: answers wait in a queue for
// the writer, which init drains as it reads standard input.
//
// Close ends the bridge when the run ends: it cancels the calls in flight,
// drops their answers and every answer not yet written, and returns once
// its goroutines have ended.
type Bridge struct {
	caller runner.ToolCaller
	limits runner.CallLimits
	w      io.Writer
	ctx    context.Context
	cancel context.CancelFunc
	calls  sync.WaitGroup
	done   chan struct{} // the writer ended

	mu       sync.Mutex
	seq      int // request lines so far
	inFlight int
	closed   bool
	queue    [][]byte
	wake     chan struct{} // capacity 1: the queue has an answer
}

// NewBridge starts the bridge of a run with caller and limits, writing
// its answers to w (the sandbox's standard input, after Input.Write:
// init reads no answer before the whole input, and no call comes before
// the program starts). ctx bounds every call.
func NewBridge(ctx context.Context, caller runner.ToolCaller, limits runner.CallLimits, w io.Writer) *Bridge {
	ctx, cancel := context.WithCancel(ctx)
	b := &Bridge{caller: caller, limits: limits, w: w, ctx: ctx, cancel: cancel, done: make(chan struct{}), wake: make(chan struct{}, 1)}
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

// Close cancels the calls in flight and drops every answer not yet
// written, then waits for the bridge's goroutines: a ToolCaller returns
// when its ctx ends, and the writer once a write in progress returns (the
// caller closes w if the sandbox may have stopped reading).
func (b *Bridge) Close() {
	b.mu.Lock()
	b.closed = true
	b.queue = nil
	b.mu.Unlock()
	b.cancel()
	b.calls.Wait()
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
	if oversize {
		id := "0"
		if idRE.Match(line) {
			id = string(line)
		}
		b.answerLocked(call, id, nil, &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxArgumentBytes,
			Message: fmt.Sprintf("the request is longer than %d bytes: its arguments may take at most %d bytes (%s)", b.LineMax(), b.limits.MaxArgumentBytes, runner.RuleMaxArgumentBytes)})
		return
	}
	req, id, err := parseRequest(line)
	if err != nil {
		b.answerLocked(call, id, nil, &runner.ToolError{Kind: runner.ToolBadRequest, Message: "not a request: " + err.Error()})
		return
	}
	lim := b.limits
	switch {
	case b.seq > lim.MaxCalls:
		b.answerLocked(call, id, nil, &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxCalls,
			Message: fmt.Sprintf("this run may make at most %d calls (%s); the run goes on", lim.MaxCalls, runner.RuleMaxCalls)})
		return
	case int64(len(req.Arguments)) > lim.MaxArgumentBytes:
		b.answerLocked(call, id, nil, &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxArgumentBytes,
			Message: fmt.Sprintf("the arguments take %d bytes, more than the %d allowed (%s)", len(req.Arguments), lim.MaxArgumentBytes, runner.RuleMaxArgumentBytes)})
		return
	case b.inFlight >= lim.MaxInFlight:
		b.answerLocked(call, id, nil, &runner.ToolError{Kind: runner.ToolLimit, Rule: runner.RuleMaxInFlight,
			Message: fmt.Sprintf("at most %d calls may be in flight at once (%s); wait for an answer first", lim.MaxInFlight, runner.RuleMaxInFlight)})
		return
	}
	b.inFlight++
	tc := runner.ToolCall{Server: req.Server, Tool: req.Tool, Arguments: req.Arguments, Seq: b.seq, InFlight: b.inFlight}
	b.calls.Add(1)
	go b.run(call, id, tc)
}

// run makes one call and queues its answer.
func (b *Bridge) run(call uint64, id string, tc runner.ToolCall) {
	defer b.calls.Done()
	ctx, cancel := context.WithTimeout(b.ctx, b.limits.Timeout)
	defer cancel()
	res := b.caller.CallTool(ctx, tc)
	var te *runner.ToolError
	switch {
	case b.ctx.Err() != nil:
		te = &runner.ToolError{Kind: runner.ToolCancelled, Message: "the run ended"}
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		te = &runner.ToolError{Kind: runner.ToolTimeout, Rule: runner.RuleTimeout,
			Message: fmt.Sprintf("the call took longer than %v (%s)", b.limits.Timeout, runner.RuleTimeout)}
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
