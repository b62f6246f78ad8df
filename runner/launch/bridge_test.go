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

type unitCaller struct {
	mu    sync.Mutex
	calls []runner.ToolCall
	block chan struct{}
}

func (c *unitCaller) CallTool(ctx context.Context, call runner.ToolCall) runner.ToolResult {
	c.mu.Lock()
	c.calls = append(c.calls, call)
	c.mu.Unlock()
	if call.Tool == "block" {
		select {
		case <-c.block:
		case <-ctx.Done():
		}
	}
	return runner.ToolResult{Result: json.RawMessage(`{"content":[]}`)}
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
