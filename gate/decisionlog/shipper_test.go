package decisionlog_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/decisionlog"
)

func sha256hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// sidecar is an audit log with a shipper on it.
type sidecar struct {
	t    *testing.T
	path string
	log  *audit.Log
	opts decisionlog.Options
	sh   *decisionlog.Shipper
	stop context.CancelFunc
	done chan error
}

func newSidecar(t *testing.T, r *receiver, aopts audit.Options, set func(o *decisionlog.Options)) *sidecar {
	t.Helper()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, aopts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	o := decisionlog.Options{
		URL: r.url(), AuditPath: path, Head: l.Head, Writer: l, Instance: "sc1", Version: "test",
		Labels: map[string]string{"team": "platform"}, BatchEvents: 10,
		MinBackoff: 2 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, Poll: 5 * time.Millisecond,
	}
	if set != nil {
		set(&o)
	}
	return &sidecar{t: t, path: path, log: l, opts: o}
}

// start starts a new shipper on the log.
func (s *sidecar) start() {
	s.t.Helper()
	sh, err := decisionlog.New(s.opts)
	if err != nil {
		s.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	s.sh, s.stop, s.done = sh, cancel, done
	go func() { done <- sh.Run(ctx) }()
	s.t.Cleanup(func() { cancel(); <-done })
}

// halt stops the shipper cleanly and waits for it.
func (s *sidecar) halt() {
	s.t.Helper()
	s.stop()
	if err := <-s.done; err != nil {
		s.t.Fatalf("Run: %v", err)
	}
	s.done <- nil // for the cleanup
}

// write writes n decision lines.
func (s *sidecar) write(n int) {
	s.t.Helper()
	for i := range n {
		if err := s.log.Write(audit.Record{Kind: audit.KindDecision, DecisionID: fmt.Sprintf("d_%d", i), Tool: "Bash", Event: "PreToolUse",
			Decision: "allow", Rule: "tool.allowed", Reason: "ok", PolicyRevision: "rev7", ToolInput: map[string]any{"command": "ls"}}); err != nil {
			s.t.Fatal(err)
		}
	}
}

func (s *sidecar) head() int64 { seq, _ := s.log.Head(); return seq }

// waitFor polls cond for up to a minute.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// receivedAll waits until the receiver holds as many distinct lines as
// the log, and checks them against the log.
func receivedAll(t *testing.T, r *receiver, s *sidecar) []wireEvent {
	t.Helper()
	waitFor(t, "every line to arrive", func() bool {
		evs, _ := r.snapshot()
		return len(evs) > 0 && evs[len(evs)-1].Custom["audit"].Seq >= s.head() && s.sh.Backlog() == 0
	})
	evs, problems := r.snapshot()
	if len(problems) > 0 {
		t.Fatalf("receiver saw problems: %q", problems)
	}
	return evs
}

// wantAll checks that events hold every line 1..head of the log exactly
// once and in order.
func wantAll(t *testing.T, evs []wireEvent, s *sidecar) {
	t.Helper()
	seqs := checkChain(t, evs, localLines(t, s.path))
	if int64(len(seqs)) != s.head() || seqs[0] != 1 {
		t.Fatalf("got %d lines from %v, want lines 1 to %d", len(seqs), seqs[:min(3, len(seqs))], s.head())
	}
}

func TestEveryLineArrivesOnceInOrderAcrossAnOutage(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{}, nil)
	s.write(25)
	s.start()
	receivedAll(t, r, s)

	// The receiver answers 503: nothing it refuses counts.
	r.set(func(r *receiver) { r.status = 503 })
	s.write(30)
	failed := func(n float64) func() bool {
		return func() bool { return value(collector(s.sh, "failed_attempts")) >= n }
	}
	waitFor(t, "attempts refused with 503", failed(3))
	// Then it is gone altogether: connections are refused.
	r.down()
	s.write(20)
	waitFor(t, "attempts to a closed port", failed(6))
	if st := s.sh.Status(); st.KeepingUp || st.LastError == "" || st.Backlog < 50 {
		t.Fatalf("status during the outage: %+v", st)
	}
	r.set(func(r *receiver) { r.status = 0 })
	r.up()
	evs := receivedAll(t, r, s)
	wantAll(t, evs, s)
	if got := value(collector(s.sh, "shipped")); got != float64(s.head()) {
		t.Fatalf("shipped_total %v, want %d", got, s.head())
	}
	if st := s.sh.Status(); !st.KeepingUp || st.Backlog != 0 {
		t.Fatalf("status after the outage: %+v", st)
	}
	for _, ev := range evs {
		if ev.Labels["team"] != "platform" || ev.Revision != "rev7" || ev.Result["decision"] != "allow" || ev.Path != "gatekeeper/decision" {
			t.Fatalf("event %s: labels %v revision %q result %v path %q", ev.DecisionID, ev.Labels, ev.Revision, ev.Result, ev.Path)
		}
	}
}

func TestACleanRestartLeavesNoGapAndNoDuplicate(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{MaxBytes: 4 << 10, Compress: true}, func(o *decisionlog.Options) { o.BatchEvents = 7 })
	s.write(300) // rotated into compressed files along the way
	s.start()
	waitFor(t, "part of the backlog to arrive", func() bool { evs, _ := r.snapshot(); return len(evs) >= 50 })
	s.halt()
	mid, _ := r.snapshot()
	if len(mid) >= 300 {
		t.Fatalf("the shipper was stopped after the whole backlog (%d events): the test proves nothing", len(mid))
	}
	s.write(40)
	s.start() // a new shipper on the same log, as after a sidecar restart
	wantAll(t, receivedAll(t, r, s), s)
}

func TestACrashBetweenAckAndCursorResendsOnlyTheLastBatchWithTheSameIDs(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{}, nil)
	s.write(45)
	s.start()
	receivedAll(t, r, s)
	s.halt()
	// A crash after the receiver acknowledged the last batch (lines 41 to
	// 45) and before the cursor moved leaves the cursor at line 40.
	local := localLines(t, s.path)
	cur, _ := json.Marshal(decisionlog.Cursor{Seq: 40, Hash: sha256hex(local[40])})
	if err := os.WriteFile(s.path+".decision-log-cursor", cur, 0o600); err != nil {
		t.Fatal(err)
	}
	first, _ := r.snapshot()
	s.start()
	waitFor(t, "the re-sent batch", func() bool { evs, _ := r.snapshot(); return len(evs) >= len(first)+5 })
	time.Sleep(50 * time.Millisecond) // room for anything else it would wrongly send
	all, _ := r.snapshot()
	again := all[len(first):]
	if len(again) != 5 {
		t.Fatalf("re-sent %d events, want the last batch of 5", len(again))
	}
	for i, ev := range again {
		if want := first[40+i].DecisionID; ev.DecisionID != want || ev.Custom["audit"] != first[40+i].Custom["audit"] {
			t.Fatalf("re-sent event %d: %s %v, want %s as first sent", i, ev.DecisionID, ev.Custom["audit"], want)
		}
	}
	checkChain(t, first, local)
}

func TestABacklogAtItsBoundDeniesUnderBlockAndRecovers(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	r.down()
	s := newSidecar(t, r, audit.Options{}, func(o *decisionlog.Options) { o.MaxBacklog = 20 })
	s.start()
	s.write(19)
	if _, _, held := s.sh.Hold(); held {
		t.Fatal("held below the bound")
	}
	s.write(1)
	rule, reason, held := s.sh.Hold()
	if !held || rule != decisionlog.RuleBacklogFull || !strings.Contains(reason, "cannot be reached") {
		t.Fatalf("at the bound: held %v rule %q reason %q", held, rule, reason)
	}
	if st := s.sh.Status(); st.Ready() || !st.Full {
		t.Fatalf("status at the bound: %+v, ready %v", st, st.Ready())
	}
	r.up()
	waitFor(t, "the hold to lift", func() bool { _, _, held := s.sh.Hold(); return !held })
	wantAll(t, receivedAll(t, r, s), s)
	if got := value(collector(s.sh, "dropped")); got != 0 {
		t.Fatalf("dropped_total %v under block", got)
	}
}

func TestDropSkipsTheOldestLinesAndSaysHowMany(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	r.set(func(r *receiver) { r.status = 503 })
	s := newSidecar(t, r, audit.Options{}, func(o *decisionlog.Options) { o.MaxBacklog = 20; o.Overflow = decisionlog.Drop })
	s.start()
	s.write(70)
	waitFor(t, "a drop", func() bool { return value(collector(s.sh, "dropped")) > 0 })
	if _, _, held := s.sh.Hold(); held {
		t.Fatal("drop never holds decisions")
	}
	r.set(func(r *receiver) { r.status = 0 })
	evs := receivedAll(t, r, s)
	seqs := checkChain(t, evs, localLines(t, s.path))
	// Every line either arrived or lies in a range a decision_log line
	// that arrived announced, never both, and the counts agree.
	covered := map[int64]int{}
	for _, q := range seqs {
		covered[q]++
	}
	var announced int64
	for _, ev := range evs {
		if ev.Path != "gatekeeper/decision_log" {
			continue
		}
		if ev.Input["rule"] != decisionlog.RuleDropped {
			t.Fatalf("decision_log line with rule %v", ev.Input["rule"])
		}
		d := ev.Input["dropped"].(map[string]any)
		n, sum := int64(d["lines"].(float64)), int64(0)
		for _, r := range d["ranges"].([]any) {
			from, to := int64(r.([]any)[0].(float64)), int64(r.([]any)[1].(float64))
			for q := from; q <= to; q++ {
				covered[q]++
			}
			sum += to - from + 1
		}
		if n != sum {
			t.Fatalf("dropped %v: lines does not match its ranges", d)
		}
		announced += n
	}
	for q := int64(1); q <= s.head(); q++ {
		if covered[q] != 1 {
			t.Fatalf("line %d arrived or was announced %d times, want once", q, covered[q])
		}
	}
	if got := value(collector(s.sh, "dropped")); announced == 0 || got != float64(announced) {
		t.Fatalf("dropped_total %v, the decision_log lines announce %d", got, announced)
	}
}

func TestLinesRetentionRemovedBeforeShippingAreAnnounced(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{MaxBytes: 2 << 10, Keep: 1}, nil)
	s.write(100)                   // rotations remove all but the newest closed file
	local := localLines(t, s.path) // the decision_log line may rotate, and remove, once more
	s.start()
	evs := receivedAll(t, r, s)
	maps.Copy(local, localLines(t, s.path))
	seqs := checkChain(t, evs, local)
	var pruned *wireEvent
	for i := range evs {
		if evs[i].Input["rule"] == decisionlog.RulePruned {
			pruned = &evs[i]
		}
	}
	if pruned == nil {
		t.Fatal("no decision_log line announced the removed lines")
	}
	d := pruned.Input["dropped"].(map[string]any)
	if d["from"] != 1.0 || int64(d["to"].(float64)) != seqs[0]-1 {
		t.Fatalf("announced %v, want lines 1 to %d (the first shipped is %d)", d, seqs[0]-1, seqs[0])
	}
	if got := value(collector(s.sh, "dropped")); got != d["lines"].(float64) {
		t.Fatalf("dropped_total %v, announced %v", got, d["lines"])
	}
}

func TestTheTokenIsSentAndReadAgainAfterRotation(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	tok := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tok, []byte("first-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r.set(func(r *receiver) { r.token = "first-token" })
	s := newSidecar(t, r, audit.Options{}, func(o *decisionlog.Options) { o.TokenFile = tok })
	s.write(5)
	s.start()
	receivedAll(t, r, s)
	r.set(func(r *receiver) { r.token = "second-token" })
	s.write(5)
	waitFor(t, "a refusal of the old token", func() bool { return value(collector(s.sh, "failed_attempts")) >= 1 })
	if err := os.WriteFile(tok, []byte("second-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	wantAll(t, receivedAll(t, r, s), s)
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.auths[0] != "Bearer first-token" || r.auths[len(r.auths)-1] != "Bearer second-token" {
		t.Fatalf("authorization headers %q", r.auths)
	}
}

func TestA400IsRetriedNotDropped(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	r.set(func(r *receiver) { r.failNext = 3 })
	s := newSidecar(t, r, audit.Options{}, nil)
	s.write(12)
	s.start()
	wantAll(t, receivedAll(t, r, s), s)
	if got := value(collector(s.sh, "failed_attempts")); got != 3 {
		t.Fatalf("failed_attempts_total %v, want 3", got)
	}
	if got := value(collector(s.sh, "dropped")); got != 0 {
		t.Fatalf("dropped_total %v", got)
	}
}

func TestAMaskedValueNeverReachesTheReceiver(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{}, nil)
	const secret = "sk-live-0123456789abcdef"
	if err := s.log.Write(audit.Record{Kind: audit.KindDecision, Tool: "mcp__x__call", Decision: "allow",
		ToolInput: map[string]any{"api_key": secret, "nested": map[string]any{"password": secret}, "query": "fine"}}); err != nil {
		t.Fatal(err)
	}
	s.start()
	evs := receivedAll(t, r, s)
	r.mu.Lock()
	for _, b := range r.bodies {
		if bytes.Contains(b, []byte(secret)) {
			t.Errorf("a request carried the secret: %s", b)
		}
	}
	r.mu.Unlock()
	in := evs[0].Input["tool_input"].(map[string]any)
	if in["api_key"] != audit.Masked || in["query"] != "fine" {
		t.Fatalf("tool_input shipped as %v", in)
	}
}

func TestABundlePolicyIsNamedWithItsRevision(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{}, func(o *decisionlog.Options) { o.Bundle = "gatekeeper" })
	s.write(1)
	s.start()
	ev := receivedAll(t, r, s)[0]
	if ev.Bundles["gatekeeper"]["revision"] != "rev7" || ev.Revision != "" {
		t.Fatalf("bundles %v, revision %q", ev.Bundles, ev.Revision)
	}
}

func TestABrokenChainStopsShippingLoudly(t *testing.T) {
	t.Parallel()
	r := newReceiver(t)
	s := newSidecar(t, r, audit.Options{}, nil)
	s.write(5)
	s.log.Close()
	b, err := os.ReadFile(s.path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.path, bytes.Replace(b, []byte(`"d_2"`), []byte(`"d_X"`), 1), 0o600); err != nil {
		t.Fatal(err)
	}
	s.opts.Head = func() (int64, string) { return 5, "" }
	sh, err := decisionlog.New(s.opts)
	if err != nil {
		t.Fatal(err)
	}
	err = sh.Run(t.Context())
	if err == nil || !strings.Contains(err.Error(), "chain is broken") {
		t.Fatalf("Run returned %v, want a broken chain", err)
	}
	if st := sh.Status(); st.Stopped == "" || st.Ready() {
		t.Fatalf("status %+v", st)
	}
	evs, _ := r.snapshot()
	for _, ev := range evs {
		if ev.Custom["audit"].Seq >= 3 {
			t.Fatalf("line %d after the break was shipped", ev.Custom["audit"].Seq)
		}
	}
}

func TestOptionsAreChecked(t *testing.T) {
	t.Parallel()
	base := decisionlog.Options{URL: "http://127.0.0.1:1/logs", AuditPath: "x", Head: func() (int64, string) { return 0, "" }, Writer: nopWriter{}}
	for name, set := range map[string]func(o *decisionlog.Options){
		"a URL without a scheme":      func(o *decisionlog.Options) { o.URL = "127.0.0.1/logs" },
		"an unknown overflow":         func(o *decisionlog.Options) { o.Overflow = "spill" },
		"a label gatekeeper sets":     func(o *decisionlog.Options) { o.Labels = map[string]string{"app": "x"} },
		"a negative backlog":          func(o *decisionlog.Options) { o.MaxBacklog = -1 },
		"a max backoff below min":     func(o *decisionlog.Options) { o.MinBackoff, o.MaxBackoff = time.Second, time.Millisecond },
		"a CA file that is not there": func(o *decisionlog.Options) { o.CAFile = "/nonexistent/ca.pem" },
		"a token over plain http to another host": func(o *decisionlog.Options) {
			o.URL, o.TokenFile = "http://logs.example.com/logs", "/run/token"
		},
	} {
		o := base
		set(&o)
		if _, err := decisionlog.New(o); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, url := range []string{"http://127.0.0.1:1/logs", "http://[::1]:1/logs", "http://localhost:1/logs", "https://logs.example.com/logs"} {
		o := base
		o.URL, o.TokenFile = url, "/run/token"
		if _, err := decisionlog.New(o); err != nil {
			t.Errorf("a token to %s: %v, want it accepted (loopback or https)", url, err)
		}
	}
	if _, err := decisionlog.New(base); err != nil {
		t.Fatalf("the base options: %v", err)
	}
}

// value reads a counter's or gauge's value.
func value(c prometheus.Collector) float64 {
	var m dto.Metric
	if err := c.(prometheus.Metric).Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

type nopWriter struct{}

func (nopWriter) Write(audit.Record) error { return nil }

// collector returns the shipper's metric whose name contains part.
func collector(sh *decisionlog.Shipper, part string) prometheus.Collector {
	for _, c := range sh.Collectors() {
		ch := make(chan *prometheus.Desc, 1)
		c.Describe(ch)
		if strings.Contains((<-ch).String(), "gatekeeper_decision_log_"+part) {
			return c
		}
	}
	panic("no metric " + part)
}
