package bench

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// PerfProfile is a CPU profile of the running sidecar taken with perf(1):
// where its CPU time went while it served the heaviest throughput level.
type PerfProfile struct {
	Command string `json:"command"`
	Samples int    `json:"samples"`
	// Buckets group the self time of every symbol by what it does.
	Buckets []PerfEntry `json:"buckets"`
	// Top are the symbols with the most self time.
	Top []PerfEntry `json:"top"`
	// Paths are key functions with the time spent in them and everything
	// they call (perf's "children" view).
	Paths []PerfEntry `json:"inclusive"`
}

// keyPaths are the functions whose inclusive time the report lists, with
// what each stands for.
var keyPaths = []struct{ sym, name string }{
	{"github.com/gatekeeper-ai/gatekeeper/gate/server.(*conn).decide", "decide handler: input, Rego, audit line, reply (server.(*conn).decide)"},
	{"github.com/gatekeeper-ai/gatekeeper/gate.(*Query).Decide", "policy decision: input and evaluation (gate.(*Query).Decide)"},
	{"github.com/gatekeeper-ai/gatekeeper/gate.buildInput", "Rego input: tool_input conversion, path facts (gate.buildInput)"},
	{"github.com/gatekeeper-ai/gatekeeper/gate/hostpath.Normalize", "host path normalization, lstat of every component (hostpath.Normalize)"},
	{"github.com/open-policy-agent/opa/v1/rego.PreparedEvalQuery.Eval", "Rego evaluation (rego.PreparedEvalQuery.Eval)"},
	{"github.com/open-policy-agent/opa/v1/topdown.builtinMember", "`x in xs` and `some x in xs` (topdown.builtinMember)"},
	{"github.com/open-policy-agent/opa/v1/topdown.builtinGlobMatch", "glob.match (topdown.builtinGlobMatch)"},
	{"github.com/gatekeeper-ai/gatekeeper/gate/audit.(*Log).Write", "audit line: mask, JSON, sha256, write (audit.(*Log).Write)"},
	{"github.com/gatekeeper-ai/gatekeeper/gate/wire.Decode", "frame decode (wire.Decode)"},
	{"github.com/gatekeeper-ai/gatekeeper/gate/wire.Encode", "reply encode (wire.Encode)"},
	{"github.com/gorilla/websocket.(*Conn).ReadMessage", "WebSocket read (websocket.(*Conn).ReadMessage)"},
	{"github.com/gorilla/websocket.(*Conn).WriteMessage", "WebSocket write (websocket.(*Conn).WriteMessage)"},
	{"runtime.newstack", "goroutine stack growth (runtime.newstack → copystack)"},
	{"runtime.gcBgMarkWorker", "garbage collector, background marking (runtime.gcBgMarkWorker)"},
	{"runtime.mallocgc", "allocation (runtime.mallocgc)"},
	{"runtime.schedule", "scheduler (runtime.schedule)"},
}

// PerfEntry is a share of the profile's samples.
type PerfEntry struct {
	Name    string  `json:"name"`
	Percent float64 `json:"percent"`
}

type perfRecording struct {
	cmd  *exec.Cmd
	data string
	log  bytes.Buffer
}

// startPerf records pid's on-CPU call stacks at 999 Hz into data.
func startPerf(pid int, data string) (*perfRecording, error) {
	perf, err := exec.LookPath("perf")
	if err != nil {
		return nil, errors.New("perf is not installed; no profile of the running sidecar")
	}
	r := &perfRecording{data: data}
	r.cmd = exec.Command(perf, "record", "-F", "999", "-g", "-p", strconv.Itoa(pid), "-o", data)
	r.cmd.Stdout, r.cmd.Stderr = &r.log, &r.log
	if err := r.cmd.Start(); err != nil {
		return nil, err
	}
	time.Sleep(300 * time.Millisecond) // perf attaches
	return r, nil
}

// stop ends the recording and summarizes it.
func (r *perfRecording) stop(ctx context.Context) (*PerfProfile, error) {
	_ = r.cmd.Process.Signal(syscall.SIGINT)
	if err := r.cmd.Wait(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, err
		}
	}
	if fi, err := os.Stat(r.data); err != nil || fi.Size() == 0 {
		return nil, fmt.Errorf("perf record wrote nothing: %s", strings.TrimSpace(r.log.String()))
	}
	args := []string{"report", "-i", r.data, "--stdio", "--no-children", "--sort", "sym", "-g", "none", "--percent-limit", "0"}
	out, err := exec.CommandContext(ctx, "perf", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("perf report: %w", err)
	}
	p := parsePerfReport(bytes.NewReader(out))
	p.Command = "perf record -F 999 -g -p <sidecar>; perf " + strings.Join(args, " ")
	args = []string{"report", "-i", r.data, "--stdio", "--children", "--sort", "sym", "-g", "none", "--percent-limit", "0"}
	out, err = exec.CommandContext(ctx, "perf", args...).Output()
	if err != nil {
		return nil, fmt.Errorf("perf report --children: %w", err)
	}
	p.Paths = parseChildren(bytes.NewReader(out))
	return p, nil
}

// parsePerfReport reads `perf report --stdio --no-children --sort sym`:
// lines like "  12.34%  [.] runtime.mallocgc" ([k] for kernel symbols).
func parsePerfReport(r io.Reader) *PerfProfile {
	p := &PerfProfile{}
	buckets := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "# Samples:") {
			f := strings.Fields(line)
			if len(f) >= 3 {
				n, _ := strconv.Atoi(strings.TrimRight(f[2], "KM"))
				switch {
				case strings.HasSuffix(f[2], "K"):
					n *= 1000
				case strings.HasSuffix(f[2], "M"):
					n *= 1000000
				}
				p.Samples = n
			}
		}
		if line == "" || line[0] == '#' {
			continue
		}
		pct, rest, ok := strings.Cut(line, "%")
		if !ok {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(pct), 64)
		if err != nil {
			continue
		}
		sym := strings.TrimSpace(rest)
		p.Top = append(p.Top, PerfEntry{Name: sym, Percent: v})
		buckets[perfBucket(sym)] += v
	}
	sort.Slice(p.Top, func(i, j int) bool { return p.Top[i].Percent > p.Top[j].Percent })
	if len(p.Top) > 25 {
		p.Top = p.Top[:25]
	}
	for k, v := range buckets {
		p.Buckets = append(p.Buckets, PerfEntry{Name: k, Percent: v})
	}
	sort.Slice(p.Buckets, func(i, j int) bool { return p.Buckets[i].Percent > p.Buckets[j].Percent })
	return p
}

// parseChildren reads `perf report --children` lines ("  42.98%  0.20%  [.] sym")
// and returns the inclusive share of each of keyPaths.
func parseChildren(r io.Reader) []PerfEntry {
	incl := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 4 || !strings.HasSuffix(f[0], "%") {
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSuffix(f[0], "%"), 64)
		if err != nil {
			continue
		}
		incl[strings.Join(f[3:], " ")] = v
	}
	var out []PerfEntry
	for _, k := range keyPaths {
		if v, ok := incl[k.sym]; ok {
			out = append(out, PerfEntry{Name: k.name, Percent: v})
		}
	}
	return out
}

// perfBucket says what a symbol is doing, by its package.
func perfBucket(sym string) string {
	if strings.HasPrefix(sym, "[k]") {
		return "kernel (socket I/O, audit file writes, scheduling)"
	}
	s := strings.TrimSpace(strings.TrimPrefix(sym, "[.]"))
	for _, b := range []struct{ prefix, name string }{
		{"github.com/open-policy-agent/opa/", "OPA: Rego evaluation and value conversion"},
		{"github.com/gatekeeper-ai/gatekeeper/gate/audit", "gatekeeper audit log (JSON, sha256 chain)"},
		{"crypto/", "gatekeeper audit log (JSON, sha256 chain)"},
		{"github.com/gatekeeper-ai/gatekeeper/gate/wire", "wire frames: strict JSON decode and encode"},
		{"encoding/json", "JSON (encoding/json: tool_input, audit lines, replies)"},
		{"github.com/gatekeeper-ai/gatekeeper/gate/hostpath", "host path normalization"},
		{"github.com/gorilla/websocket", "WebSocket framing"},
		{"github.com/gatekeeper-ai/gatekeeper/", "gatekeeper: other"},
		{"github.com/prometheus/", "metrics"},
		{"runtime.", "Go runtime: GC, allocation, scheduler"},
		{"aeshashbody", "Go runtime: GC, allocation, scheduler"},
		{"memeqbody", "Go runtime: GC, allocation, scheduler"},
		{"indexbytebody", "Go runtime: GC, allocation, scheduler"},
		{"gcWriteBarrier", "Go runtime: GC, allocation, scheduler"},
		{"internal/", "Go I/O and syscalls"},
		{"syscall.", "Go I/O and syscalls"},
		{"net.", "Go I/O and syscalls"},
		{"os.", "Go I/O and syscalls"},
		{"bufio.", "Go I/O and syscalls"},
		{"sync.", "Go runtime: GC, allocation, scheduler"},
		{"strings.", "strings, sort, strconv, regexp"},
		{"sort.", "strings, sort, strconv, regexp"},
		{"strconv.", "strings, sort, strconv, regexp"},
		{"regexp", "strings, sort, strconv, regexp"},
		{"unicode", "strings, sort, strconv, regexp"},
		{"github.com/gobwas/glob", "OPA: Rego evaluation and value conversion"},
		{"github.com/google/uuid", "gatekeeper: other"},
	} {
		if strings.HasPrefix(s, b.prefix) {
			return b.name
		}
	}
	return "other"
}

// poolMetrics returns the lines of the sidecar's /metrics that name the
// warm pool, so the report shows that warm runs hit it.
func poolMetrics(ctx context.Context, s *Sidecar) []string {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://gatekeeper/metrics", nil)
	if err != nil {
		return nil
	}
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := UnixHTTPClient(s.Socket, 1).Do(req)
	if err != nil {
		return []string{"metrics: " + err.Error()}
	}
	defer resp.Body.Close()
	var out []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		l := sc.Text()
		if strings.Contains(l, "pool") && !strings.HasPrefix(l, "#") {
			out = append(out, l)
		}
	}
	return out
}
