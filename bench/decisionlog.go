package bench

import (
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/decisionlog"
)

// DecisionLogResult is row 12: the decision-log shipper (gate/decisionlog)
// against a loopback receiver that gunzips and decodes every batch.
type DecisionLogResult struct {
	// Throughput: Lines decision lines already in the log, shipped with
	// the default batch (500 events, 4 MiB) until the backlog is 0.
	Lines        int     `json:"lines"`
	LineBytes    int     `json:"line_bytes"`
	Seconds      float64 `json:"seconds"`
	EventsPerSec float64 `json:"events_per_second"`
	GzipRatio    float64 `json:"gzip_ratio"`
	// Outage: lines written at Rate a second while the receiver answers
	// 503 for OutageSeconds, under the default bound and overflow.
	Rate           int     `json:"rate_per_second"`
	OutageSeconds  float64 `json:"outage_seconds"`
	MaxBacklog     int64   `json:"max_backlog"`
	Overflow       string  `json:"overflow"`
	PeakBacklog    int64   `json:"peak_backlog"`
	Written        int64   `json:"written"`
	Received       int64   `json:"received"`
	Dropped        float64 `json:"dropped"`
	HeldDecisions  int64   `json:"held_decisions"`
	DrainSeconds   float64 `json:"drain_seconds"`
	PeakHeapMiB    float64 `json:"peak_heap_mib"`
	FailedAttempts float64 `json:"failed_attempts"`
}

// Fixed sizes of row 12; the outage is Config.DecisionLogOutage.
const (
	dlLines = 100_000
	dlRate  = 100
)

// dlReceiver counts the events of each 2xx batch, as a decision-log
// service would take them: gunzip, decode the array.
type dlReceiver struct {
	down    atomic.Bool
	events  atomic.Int64
	gz, raw atomic.Int64
}

func (r *dlReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	if r.down.Load() {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	cr := &countReader{r: req.Body}
	zr, err := gzip.NewReader(cr)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	zc := &countReader{r: zr}
	var evs []json.RawMessage
	if err := json.NewDecoder(zc).Decode(&evs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.events.Add(int64(len(evs)))
	r.gz.Add(cr.n)
	r.raw.Add(zc.n)
	w.WriteHeader(http.StatusNoContent)
}

type countReader struct {
	r interface{ Read([]byte) (int, error) }
	n int64
}

func (c *countReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// dlSidecar is an audit log in dir with a shipper to url.
func dlSidecar(dir, url string) (*audit.Log, *decisionlog.Shipper, error) {
	l, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{MaxBytes: 100 << 20})
	if err != nil {
		return nil, nil, err
	}
	sh, err := decisionlog.New(decisionlog.Options{URL: url, AuditPath: filepath.Join(dir, "audit.jsonl"), Head: l.Head, Writer: l, Instance: "bench", Version: "bench"})
	if err != nil {
		l.Close()
		return nil, nil, err
	}
	return l, sh, nil
}

// dlRecord is a decision line as the sidecar writes one for a Read.
func dlRecord(i int) audit.Record {
	return audit.Record{Kind: audit.KindDecision, DecisionID: fmt.Sprintf("d_%016x", i), QueryID: "q_0123456789abcdef", ToolUseID: fmt.Sprintf("toolu_%d", i),
		Tool: "Read", Event: "PreToolUse", Decision: "allow", Rule: "read.workspace", Reason: "reading inside the workspace is allowed",
		PolicyRevision: "sha256:0123456789abcdef0123456789abcdef", PolicyHash: "0123456789abcdef", Client: "bench",
		ToolInput: map[string]any{"file_path": fmt.Sprintf("/workspace/src/file_%d.py", i)}}
}

func (e *env) decisionLog(ctx context.Context) error {
	rcv := &dlReceiver{}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: rcv}
	go srv.Serve(ln)
	defer srv.Close()
	url := "http://" + ln.Addr().String() + "/logs"
	res := &DecisionLogResult{Lines: dlLines, Rate: dlRate, MaxBacklog: decisionlog.DefaultMaxBacklog, Overflow: string(decisionlog.Block)}

	// Throughput: a backlog of dlLines lines, shipped from disk.
	dir, err := os.MkdirTemp(e.tmp, "dl-")
	if err != nil {
		return err
	}
	l, sh, err := dlSidecar(dir, url)
	if err != nil {
		return err
	}
	for i := range dlLines {
		if err := l.Write(dlRecord(i)); err != nil {
			return err
		}
	}
	if fi, err := os.Stat(filepath.Join(dir, "audit.jsonl")); err == nil {
		res.LineBytes = int(fi.Size() / dlLines)
	}
	sctx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = sh.Run(sctx) })
	t0 := time.Now()
	for sh.Backlog() > 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	res.Seconds = time.Since(t0).Seconds()
	stop()
	wg.Wait()
	l.Close()
	res.EventsPerSec = float64(dlLines) / res.Seconds
	res.GzipRatio = float64(rcv.raw.Load()) / float64(max(1, rcv.gz.Load()))

	// Outage: the receiver answers 503 while lines come at dlRate a second.
	rcv.events.Store(0)
	if dir, err = os.MkdirTemp(e.tmp, "dl-"); err != nil {
		return err
	}
	if l, sh, err = dlSidecar(dir, url); err != nil {
		return err
	}
	defer l.Close()
	sctx, stop = context.WithCancel(ctx)
	defer stop()
	wg.Go(func() { _ = sh.Run(sctx) })
	rcv.down.Store(true)
	outage := e.cfg.DecisionLogOutage
	res.OutageSeconds = outage.Seconds()
	tick := time.NewTicker(time.Second / dlRate)
	end := time.Now().Add(outage)
	var ms runtime.MemStats
	sample := func() {
		res.PeakBacklog = max(res.PeakBacklog, sh.Backlog())
		runtime.ReadMemStats(&ms)
		res.PeakHeapMiB = max(res.PeakHeapMiB, float64(ms.HeapInuse)/(1<<20))
	}
	for i := 0; time.Now().Before(end); i++ {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-tick.C:
		}
		if _, _, held := sh.Hold(); held {
			res.HeldDecisions++ // the sidecar would deny this decision (its deny line is still written)
		}
		if err := l.Write(dlRecord(i)); err != nil {
			return err
		}
		res.Written++
		if i%dlRate == 0 {
			sample()
		}
	}
	tick.Stop()
	sample()
	rcv.down.Store(false)
	t0 = time.Now()
	for sh.Backlog() > 0 && ctx.Err() == nil {
		time.Sleep(time.Millisecond)
	}
	res.DrainSeconds = time.Since(t0).Seconds()
	res.Received = rcv.events.Load()
	for _, c := range sh.Collectors() {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		switch d := (<-ch).String(); {
		case contains(d, "dropped_total"):
			res.Dropped = metricValue(c)
		case contains(d, "failed_attempts_total"):
			res.FailedAttempts = metricValue(c)
		}
	}
	e.res.DecisionLog = res
	return nil
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }

// metricValue reads a counter's or gauge's value.
func metricValue(c prometheus.Collector) float64 {
	m, ok := c.(prometheus.Metric)
	if !ok {
		return 0
	}
	var d dto.Metric
	if m.Write(&d) != nil {
		return 0
	}
	if d.Counter != nil {
		return d.Counter.GetValue()
	}
	return d.Gauge.GetValue()
}

// decisionLogRows renders row 12.
func (r *Results) decisionLogRows(row func(...string)) {
	x := r.DecisionLog
	if x == nil {
		row("12", "decision-log shipping to a loopback receiver", "not measured", "", "", "", "")
		return
	}
	row("12", fmt.Sprintf("decision log: %d decision lines (%d B each) already in the audit log, shipped from disk in OPA's format (gzipped batches of 500) to a loopback receiver that gunzips and decodes them", x.Lines, x.LineBytes),
		fmt.Sprintf("%.0f events/s", x.EventsPerSec), "—", fmt.Sprintf("gzip %.1f×", x.GzipRatio), "—", "")
	row("12", fmt.Sprintf("decision log: a %.0f s receiver outage (503) at %d decisions/s asked (%.0f/s written), --decision-log-overflow %s, bound %d lines", x.OutageSeconds, x.Rate, float64(x.Written)/max(1, x.OutageSeconds), x.Overflow, x.MaxBacklog),
		fmt.Sprintf("peak backlog %d, lost %.0f, denied %d; drained in %.1f s", x.PeakBacklog, x.Dropped, x.HeldDecisions, x.DrainSeconds),
		fmt.Sprintf("%d written, %d received", x.Written, x.Received), fmt.Sprintf("heap ≤ %.0f MiB", x.PeakHeapMiB), "nothing lost", r.met("decision_log_outage"))
}

// evaluateDecisionLog adds row 12's target.
func (r *Results) evaluateDecisionLog() {
	const goal = "a receiver outage at the stated decision rate loses no line (block: none dropped, every line received once the receiver returns)"
	x := r.DecisionLog
	if x == nil {
		r.target("decision_log_outage", goal, "not measured", nil)
		return
	}
	r.target("decision_log_outage", goal, fmt.Sprintf("%d written, %d received, %.0f dropped, peak backlog %d", x.Written, x.Received, x.Dropped, x.PeakBacklog),
		ptr(x.Dropped == 0 && x.Received == x.Written))
}
