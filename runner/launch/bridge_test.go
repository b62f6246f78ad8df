package launch

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const demuxTag = "0123456789abcdef"

// frameOf is a call frame as init writes it.
func frameOf(call int, flag string, piece string) string {
	return fmt.Sprintf("%s%s %d %s %d\n%s\n", callLead, demuxTag, call, flag, len(piece), piece)
}

type gotCall struct {
	call     uint64
	line     string
	oversize bool
}

func demuxAll(writes []string, maxLine int64) (string, []gotCall) {
	var out bytes.Buffer
	var calls []gotCall
	d := NewCallDemux(demuxTag, maxLine, &out, func(call uint64, line []byte, oversize bool) {
		calls = append(calls, gotCall{call, string(line), oversize})
	})
	for _, w := range writes {
		if n, err := d.Write([]byte(w)); n != len(w) || err != nil {
			panic("Write failed")
		}
	}
	d.Flush()
	return out.String(), calls
}

func TestCallDemux(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("L", callPieceMax) + "tail"
	tests := []struct {
		name   string
		writes []string
		out    string
		calls  []gotCall
		max    int64 // maxLine; 0: 8192
	}{
		{name: "output around a frame", writes: []string{"ab" + frameOf(1, "e", `{"id":1}`) + "cd"}, out: "abcd", calls: []gotCall{{1, `{"id":1}`, false}}},
		{name: "a frame split byte by byte", writes: strings.Split("x"+frameOf(2, "e", "{}")+"y", ""), out: "xy", calls: []gotCall{{2, "{}", false}}},
		{name: "a line in two pieces with output between", writes: []string{frameOf(3, "c", long[:callPieceMax]) + "out" + frameOf(3, "e", "tail")}, out: "out", calls: []gotCall{{3, long, false}}},
		{name: "another tag is output", writes: []string{callLead + "ffffffffffffffff 1 e 2\n{}\n"}, out: callLead + "ffffffffffffffff 1 e 2\n{}\n"},
		{name: "the lead alone is output", writes: []string{callLead + "|" + callLead}, out: callLead + "|" + callLead},
		{name: "a malformed frame is output", writes: []string{callLead + demuxTag + " 1 q 2\n{}\n"}, out: callLead + demuxTag + " 1 q 2\n{}\n"},
		{name: "a wrong length is output", writes: []string{callLead + demuxTag + " 1 e 3\n{}\nz"}, out: callLead + demuxTag + " 1 e 3\n{}\nz"},
		{name: "a frame cut off at the end is output", writes: []string{"a" + frameOf(1, "e", "{}")[:30]}, out: "a" + frameOf(1, "e", "{}")[:30]},
		{name: "init's refusal of a long line", writes: []string{frameOf(4, "x", "42")}, calls: []gotCall{{4, "42", true}}},
		{name: "a line past maxLine is oversize", writes: []string{frameOf(5, "c", strings.Repeat("a", 60)) + frameOf(5, "e", strings.Repeat("a", 60))}, calls: []gotCall{{5, "", true}}, max: 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if tt.max == 0 {
				tt.max = 8192
			}
			out, calls := demuxAll(tt.writes, tt.max)
			if out != tt.out {
				t.Errorf("output %q; want %q", out, tt.out)
			}
			if fmt.Sprint(calls) != fmt.Sprint(tt.calls) {
				t.Errorf("calls %.200v; want %.200v", calls, tt.calls)
			}
		})
	}
}

// FuzzCallDemux: whatever the stream holds and however it is split, the
// demux never panics, never holds more than a frame, and passes every
// byte on or takes it as part of a frame.
func FuzzCallDemux(f *testing.F) {
	f.Add([]byte("ab"+frameOf(1, "e", `{"id":1}`)+"cd"), 3)
	f.Add([]byte(frameOf(3, "c", "abc")+"zz"+frameOf(3, "e", "d")), 1)
	f.Add([]byte(callLead+demuxTag+" 1 e 9999\n"), 7)
	f.Add([]byte(frameOf(4, "x", "")), 2)
	f.Fuzz(func(t *testing.T, data []byte, split int) {
		var out bytes.Buffer
		d := NewCallDemux(demuxTag, 1<<20, &out, func(uint64, []byte, bool) {})
		if split <= 0 {
			split = 1
		}
		for i := 0; i < len(data); i += split {
			d.Write(data[i:min(i+split, len(data))])
			if len(d.held) > callFrameMax {
				t.Fatalf("holds %d bytes", len(d.held))
			}
		}
		d.Flush()
		if int64(out.Len())+d.FrameBytes != int64(len(data)) {
			t.Fatalf("output %d + frames %d bytes; the stream had %d", out.Len(), d.FrameBytes, len(data))
		}
	})
}

// unitCaller answers every call; a call of "block" first waits for a
// token on block (or its ctx's end), one of "stuck" for a token only. It counts the calls in CallTool at
// once.
type unitCaller struct {
	mu        sync.Mutex
	calls     []runner.NestedCall
	block     chan struct{}
	cur, peak int
	ctxEnded  []error
}

func (c *unitCaller) CallTool(ctx context.Context, call runner.NestedCall) runner.ToolResult {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.cur++
	c.peak = max(c.peak, c.cur)
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		c.cur--
		c.mu.Unlock()
	}()
	if call.Tool == "stuck" { // a server that ignores the cancel
		<-c.block
	}
	if call.Tool == "block" {
		select {
		case <-c.block:
		case <-ctx.Done():
			c.mu.Lock()
			c.ctxEnded = append(c.ctxEnded, ctx.Err())
			c.mu.Unlock()
			return runner.ToolResult{Err: &runner.ToolError{Kind: runner.ToolServer, Message: "ended"}}
		}
	}
	return runner.ToolResult{Result: json.RawMessage(`{"content":[]}`)}
}

func (c *unitCaller) seen() (calls []runner.NestedCall, cur, peak int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]runner.NestedCall(nil), c.calls...), c.cur, c.peak
}

// auditingCaller is a unitCaller that records the bridge's refusals too
// (runner.RefusalRecorder), as the gate's CodeCaller does.
type auditingCaller struct {
	*unitCaller
	rmu     sync.Mutex
	refused []runner.ToolRefusal
	omitted []runner.RefusalCounts
}

func (c *auditingCaller) Refused(r runner.ToolRefusal) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.refused = append(c.refused, r)
}

func (c *auditingCaller) refusals() int {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	return len(c.refused)
}

func (c *auditingCaller) Omitted(n runner.RefusalCounts) {
	c.rmu.Lock()
	defer c.rmu.Unlock()
	c.omitted = append(c.omitted, n)
}

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestBridgeDropsAnswersAfterClose: a call in flight when the bridge
// closes has its ctx cancelled, and its answer is never written.
func TestBridgeDropsAnswersAfterClose(t *testing.T) {
	t.Parallel()
	c := &unitCaller{block: make(chan struct{})}
	var w lockedBuf
	b := NewBridge(t.Context(), c, runner.CallLimits{MaxCalls: 5, MaxInFlight: 5, MaxArgumentBytes: 100, MaxResultBytes: 100, Timeout: time.Hour}, &w)
	b.Call(1, []byte(`{"id":1,"server":"s","tool":"block","arguments":{}}`), false)
	b.Call(2, []byte(`{"id":2,"server":"s","tool":"quick","arguments":{}}`), false)
	for !strings.Contains(w.String(), `"id":2`) {
		time.Sleep(time.Millisecond) // rendezvous: the quick call's answer is written
	}
	b.Close()
	b.Call(3, []byte(`{"id":3,"server":"s","tool":"quick"}`), false)
	if got := w.String(); strings.Contains(got, `"id":1`) || strings.Contains(got, `"id":3`) {
		t.Errorf("answers written after Close: %q", got)
	}
	if b.Calls() != 2 {
		t.Errorf("Calls = %d; want 2 (none after Close)", b.Calls())
	}
}

// answered counts the answers written so far.
func answered(w *lockedBuf) int { return strings.Count(w.String(), `{"id":`) }

// waitAnswers waits until n answers were written (a rendezvous, not a
// bound on time: the test's own deadline ends a wait that never ends).
func waitAnswers(t *testing.T, w *lockedBuf, n int) {
	t.Helper()
	for answered(w) < n {
		if t.Context().Err() != nil {
			t.Fatalf("%d answers; want %d", answered(w), n)
		}
		time.Sleep(time.Millisecond)
	}
}

func unitLimits() runner.CallLimits {
	return runner.CallLimits{MaxCalls: 20, MaxInFlight: 4, MaxArgumentBytes: 100, MaxResultBytes: 100, Timeout: time.Hour}
}

func goodLine(id int) []byte {
	return []byte(fmt.Sprintf(`{"id":%d,"server":"s","tool":"quick","arguments":{"n":%d}}`, id, id))
}

// TestBridgeAuditsEveryCall: whatever a program sends, each of its calls
// reaches the ToolCaller (CallTool), or is handed to it as a refusal
// (Refused), or is counted in the one Omitted of the run: Calls is their
// sum. A run's first MaxRefusalLines refusals get a Refused each; after
// MaxRefusals the bridge is closed, and a valid call then is refused too,
// never reaching CallTool.
func TestBridgeAuditsEveryCall(t *testing.T) {
	t.Parallel()
	bad := []byte(`{"id":1,"server":"s"}`)
	tests := []struct {
		name     string
		lines    func(call func(line []byte, oversize bool))
		limits   func(*runner.CallLimits)
		calls    int            // CallTool
		refused  map[string]int // Refused, by rule
		omitted  map[string]int
		closed   bool
		answered int // 0: every call
	}{
		{
			name: "25 calls under max_calls 20",
			lines: func(call func([]byte, bool)) {
				for i := range 25 {
					call(goodLine(i), false)
				}
			},
			calls: 20, refused: map[string]int{runner.RuleMaxCalls: 5},
		},
		{
			name: "bad requests, oversize lines and long arguments, each with its rule",
			lines: func(call func([]byte, bool)) {
				call(goodLine(1), false)
				call([]byte("not json"), false)
				call(bad, false)
				call([]byte(`{"id":3,"server":"s","tool":"t","arguments":[1]}`), false)
				call([]byte(`{"id":4,"server":"s","tool":"t","extra":1}`), false)
				call([]byte("5"), true)
				call([]byte(`{"id":6,"server":"s","tool":"t","arguments":{"pad":"`+strings.Repeat("a", 200)+`"}}`), false)
				call(goodLine(7), false)
			},
			calls: 2, refused: map[string]int{runner.RuleBadRequest: 4, runner.RuleMaxArgumentBytes: 2},
		},
		{
			name:   "refusals past MaxRefusalLines are counted in one line",
			limits: func(l *runner.CallLimits) { l.MaxCalls = 1000 },
			lines: func(call func([]byte, bool)) {
				for range runner.MaxRefusalLines + 100 {
					call(bad, false)
				}
				call(goodLine(1), false)
			},
			calls: 1, refused: map[string]int{runner.RuleBadRequest: runner.MaxRefusalLines}, omitted: map[string]int{runner.RuleBadRequest: 100},
		},
		{
			name:   "past MaxRefusals the bridge is closed, valid calls included",
			limits: func(l *runner.CallLimits) { l.MaxCalls = 5 },
			lines: func(call func([]byte, bool)) {
				for i := range 5 {
					call(goodLine(i), false)
				}
				for i := range runner.MaxRefusals - 10 {
					call(goodLine(i), false) // past max_calls
				}
				for range 10 {
					call([]byte("1"), true)
				}
				for i := range 7 {
					call(goodLine(i), false)
					call(bad, false)
				}
			},
			calls:   5,
			refused: map[string]int{runner.RuleMaxCalls: runner.MaxRefusalLines},
			omitted: map[string]int{runner.RuleMaxCalls: runner.MaxRefusals - 10 - runner.MaxRefusalLines, runner.RuleMaxArgumentBytes: 10, runner.RuleMaxRefusals: 14},
			closed:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			c := &auditingCaller{unitCaller: &unitCaller{}}
			var w lockedBuf
			lim := unitLimits()
			if tt.limits != nil {
				tt.limits(&lim)
			}
			b := NewBridge(t.Context(), c, lim, &w)
			n := uint64(0)
			tt.lines(func(line []byte, oversize bool) {
				n++
				b.Call(n, line, oversize)
			})
			waitAnswers(t, &w, int(n))
			b.Close()
			calls, _, _ := c.seen()
			refused := map[string]int{}
			for _, r := range c.refused {
				refused[r.Err.Rule]++
				if r.Err.Kind == "" || r.Err.Message == "" || r.Call.Seq < 1 || r.Call.Seq > int(n) {
					t.Errorf("refusal %+v: want its kind, message and seq", r)
				}
			}
			var omitted map[string]int
			closed, sum := false, 0
			if len(c.omitted) > 1 {
				t.Errorf("Omitted called %d times; want at most once", len(c.omitted))
			}
			if len(c.omitted) == 1 {
				omitted, closed = c.omitted[0].ByRule, c.omitted[0].Closed
				for _, k := range omitted {
					sum += k
				}
			}
			if len(calls) != tt.calls || fmt.Sprint(refused) != fmt.Sprint(tt.refused) || fmt.Sprint(omitted) != fmt.Sprint(tt.omitted) || closed != tt.closed {
				t.Errorf("CallTool %d, Refused %v, Omitted %v closed %v; want %d, %v, %v closed %v", len(calls), refused, omitted, closed, tt.calls, tt.refused, tt.omitted, tt.closed)
			}
			if got := len(calls) + len(c.refused) + sum; got != b.Calls() || b.Calls() != int(n) {
				t.Errorf("CallTool + Refused + Omitted = %d, Calls = %d; the program made %d", got, b.Calls(), n)
			}
		})
	}
}

// TestBridgeQueuesPastMaxInFlight: calls past max_in_flight wait and
// reach the ToolCaller in the order they came, never more than
// max_in_flight at once, and every one is answered.
func TestBridgeQueuesPastMaxInFlight(t *testing.T) {
	t.Parallel()
	c := &auditingCaller{unitCaller: &unitCaller{block: make(chan struct{})}}
	var w lockedBuf
	b := NewBridge(t.Context(), c, unitLimits(), &w)
	defer b.Close()
	const n = 16
	for i := 1; i <= n; i++ {
		b.Call(uint64(i), []byte(fmt.Sprintf(`{"id":%d,"server":"s","tool":"block"}`, i)), false)
	}
	for i := range n {
		for {
			calls, cur, _ := c.seen()
			if len(calls) == min(i+4, n) && cur == min(4, n-i) {
				break
			}
			time.Sleep(time.Millisecond) // rendezvous: the next call is in flight
		}
		c.block <- struct{}{}
	}
	waitAnswers(t, &w, n)
	calls, _, peak := c.seen()
	first := 0 // the first four start at once, in any order; then one at a time
	for i, call := range calls {
		if i < 4 {
			first |= 1 << call.Seq
		} else if call.Seq != i+1 {
			t.Errorf("call %d reached the caller as seq %d; want seq %d", i, call.Seq, i+1)
		}
		if call.InFlight < 1 || call.InFlight > 4 {
			t.Errorf("call %d reached the caller %d in flight; want 1 to 4", i, call.InFlight)
		}
	}
	if first != 0b11110 {
		t.Errorf("the first four calls to reach the caller were not seq 1 to 4: %b", first)
	}
	if peak != 4 || strings.Contains(w.String(), `"ok":false`) || len(c.refused) != 0 {
		t.Errorf("peak in flight %d, refusals %d, answers %s; want 4 at once and every call answered", peak, len(c.refused), w.String())
	}
}

// TestBridgeTimeoutCountsTheWait: a call's timeout counts from when the
// program made it: one whose timeout passes while it waits for a slot is
// answered (and recorded) as a timeout without reaching the ToolCaller;
// one still waiting when the bridge closes is recorded as cancelled.
func TestBridgeTimeoutCountsTheWait(t *testing.T) {
	t.Parallel()
	c := &auditingCaller{unitCaller: &unitCaller{block: make(chan struct{})}}
	var w lockedBuf
	lim := unitLimits()
	lim.MaxInFlight, lim.Timeout = 1, 50*time.Millisecond
	b := NewBridge(t.Context(), c, lim, &w)
	b.Call(1, []byte(`{"id":1,"server":"s","tool":"stuck"}`), false)
	b.Call(2, []byte(`{"id":2,"server":"s","tool":"block"}`), false)
	for c.refusals() == 0 {
		time.Sleep(time.Millisecond) // rendezvous: call 2's timeout passed
	}
	c.block <- struct{}{}
	waitAnswers(t, &w, 2)
	lim.Timeout = time.Hour
	b.Close()
	b2 := NewBridge(t.Context(), c, lim, &w)
	b2.Call(3, []byte(`{"id":3,"server":"s","tool":"block"}`), false)
	b2.Call(4, []byte(`{"id":4,"server":"s","tool":"block"}`), false)
	for calls, _, _ := c.seen(); len(calls) < 2; calls, _, _ = c.seen() {
		time.Sleep(time.Millisecond)
	}
	b2.Close()
	calls, _, _ := c.seen()
	var got []string
	for _, r := range c.refused {
		got = append(got, fmt.Sprintf("%d %s %s", r.Call.Seq, r.Err.Kind, r.Err.Rule))
	}
	if len(calls) != 2 || calls[0].Seq != 1 || calls[1].Seq != 1 {
		t.Errorf("the caller saw %+v; want the first call of each bridge only", calls)
	}
	if want := []string{"2 timeout " + runner.RuleTimeout, "2 cancelled "}; fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("refusals %q; want %q", got, want)
	}
	if !strings.Contains(w.String(), `{"id":2,"ok":false,"error":{"kind":"timeout","rule":"code_calls.timeout"`) {
		t.Errorf("answers %s; want call 2 answered timeout", w.String())
	}
}
