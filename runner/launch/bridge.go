package launch

import (
	"bytes"
	"io"

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
