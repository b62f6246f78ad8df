package soak

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/bench"
)

// BadResult is what one misbehaving client did and what it cost the
// sidecar.
type BadResult struct {
	Name string `json:"name"`
	// Tried counts the bad inputs: connections, frames.
	Tried int `json:"tried"`
	// Outcome says what the sidecar did about them.
	Outcome string `json:"outcome"`
	// RSSBefore is the sidecar's RSS before; PeakRSS the highest during.
	RSSBefore int64 `json:"rss_before"`
	PeakRSS   int64 `json:"peak_rss"`
	// Seconds it took.
	Seconds float64 `json:"seconds"`
}

// misbehave runs the misbehaving clients one after another while the load
// goes on; each gets a window of its own, so that the other sessions'
// latency is reported for each.
func (s *soak) misbehave(ctx context.Context) {
	for _, b := range s.badClients() {
		start := time.Now()
		res := &BadResult{Name: b.name}
		if m, err := bench.ReadMemory(s.sidecar.PID()); err == nil {
			res.RSSBefore = m.RSS
		}
		rss := bench.SampleRSS(s.sidecar.PID(), 50*time.Millisecond)
		b.run(ctx, res)
		res.PeakRSS, _ = rss.Stop()
		s.checkMem("bad: "+b.name, res)
		res.Seconds = time.Since(start).Seconds()
		s.window("bad: "+b.name, start)
		s.mu.Lock()
		s.bad = append(s.bad, *res)
		s.mu.Unlock()
		s.log.Info("soak: misbehaving client done", "name", b.name, "outcome", res.Outcome,
			"rss_before_mib", res.RSSBefore>>20, "peak_rss_mib", res.PeakRSS>>20)
		sleep(ctx, 2*time.Second)
	}
}

// badClient is one misbehaving client: its name, the number of checks
// it makes besides the memory and its window's (see expectedChecks), and
// what it does.
type badClient struct {
	name   string
	checks int
	run    func(context.Context, *BadResult)
}

// badClients are the misbehaving clients, in their order.
func (s *soak) badClients() []badClient {
	return []badClient{
		{fmt.Sprintf("%d idle connections", s.cfg.IdleConns), 3, s.idleConns},
		{"slow-loris upgrades", 1, s.slowLoris},
		{"a client that never reads", 1, s.neverReads},
		{fmt.Sprintf("a burst of %d frames", s.cfg.Burst), 2, s.burst},
		{"oversized and malformed frames", 2, s.badFrames},
		{fmt.Sprintf("%d open_query frames, never closed", s.cfg.OpenQueryFlood), 1, s.openQueryFlood},
	}
}

// memBound is the RSS growth a misbehaving client may cause: far below
// what the uncapped open_query flood caused (110 MiB), and above what the
// caps allow (the memory of at most max-conns connections, or of
// max-queries-per-conn queries).
const memBound = 96 << 20

func (s *soak) checkMem(f string, res *BadResult) {
	grew := res.PeakRSS - res.RSSBefore
	s.check(f, fmt.Sprintf("the sidecar's memory stays bounded (RSS growth ≤ %d MiB)", memBound>>20), grew <= memBound,
		"RSS %d MiB before, peak %d MiB", res.RSSBefore>>20, res.PeakRSS>>20)
}

// idleConns opens IdleConns connections that say hello and then only
// answer pings, then connections past the cap until one is refused.
func (s *soak) idleConns(ctx context.Context, res *BadResult) {
	f := "bad: " + res.Name
	d := s.sidecar.Dialer()
	conns := make([]*Conn, 0, s.cfg.IdleConns)
	var failed []string
	for range s.cfg.IdleConns {
		c, err := d.Dial(ctx, "soak-idle")
		if err != nil {
			failed = append(failed, err.Error())
			continue
		}
		conns = append(conns, c)
	}
	res.Tried = s.cfg.IdleConns
	s.check(f, "every idle connection within the cap is served", len(failed) == 0, "%d of %d refused: %v", len(failed), s.cfg.IdleConns, first(failed, 2))
	held, _ := s.sidecar.Sample(ctx)
	// Then past the cap: one more at a time until one is refused.
	var refused *HTTPError
	extra := 0
	for ; extra < s.maxConns() && refused == nil; extra++ {
		c, err := d.Dial(ctx, "soak-idle")
		if err == nil {
			conns = append(conns, c)
			continue
		}
		if !errors.As(err, &refused) {
			failed = append(failed, err.Error())
			break
		}
	}
	res.Tried += extra
	s.check(f, "a connection past --max-conns is refused with 503 and a body naming the cap",
		refused != nil && refused.Status == http.StatusServiceUnavailable && strings.Contains(refused.Body, fmt.Sprintf("maximum of %d connections (--max-conns)", s.maxConns())),
		"after %d more: %v", extra, refused)
	// Idle means idle: a ping answered now and then keeps them open.
	sleep(ctx, 5*time.Second)
	alive := 0
	for _, c := range conns {
		select {
		case <-c.Done():
		default:
			alive++
		}
	}
	s.check(f, "the idle connections stay open", alive == len(conns), "%d of %d open after 5 s", alive, len(conns))
	for _, c := range conns {
		c.Close()
	}
	for _, c := range conns {
		<-c.Done()
	}
	per := float64(held.RSS-res.RSSBefore) / float64(max(1, s.cfg.IdleConns-len(failed)))
	res.Outcome = fmt.Sprintf("%d served (RSS +%.0f KiB each), connection %d refused with 503", len(conns), per/1024, len(conns)+1)
}

func first(xs []string, n int) []string { return xs[:min(n, len(xs))] }

// slowLoris opens connections that send the upgrade request one byte a
// second; the sidecar must drop each once its header timeout (10 s)
// passes.
func (s *soak) slowLoris(ctx context.Context, res *BadResult) {
	f := "bad: " + res.Name
	const n = 50
	req := "GET /v1/ws HTTP/1.1\r\nHost: gatekeeper\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nX-Slow: " + strings.Repeat("a", 60)
	var wg sync.WaitGroup
	var dropped atomic.Int64
	var longest atomic.Int64
	begin := time.Now()
	for range n {
		wg.Go(func() {
			c, err := net.Dial("unix", s.sidecar.Socket)
			if err != nil {
				return
			}
			defer c.Close()
			for i := 0; i < len(req); i++ {
				if _, err := c.Write([]byte{req[i]}); err != nil {
					break
				}
				if i > len("GET ") {
					time.Sleep(time.Second)
				}
				_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
				var b [1]byte
				if _, err := c.Read(b[:]); err != nil && !isTimeout(err) {
					break // the sidecar answered or closed: dropped
				}
			}
			took := time.Since(begin)
			if took < 40*time.Second {
				dropped.Add(1)
			}
			longest.Store(max(longest.Load(), int64(took)))
		})
	}
	wg.Wait()
	res.Tried = n
	res.Outcome = fmt.Sprintf("all %d dropped, the last after %s", dropped.Load(), time.Duration(longest.Load()).Round(100*time.Millisecond))
	s.check(f, "every slow-loris upgrade is dropped by the header timeout (10 s)", dropped.Load() == n && time.Duration(longest.Load()) < 20*time.Second,
		"%d of %d dropped, the last after %s", dropped.Load(), n, time.Duration(longest.Load()).Round(100*time.Millisecond))
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// neverReads says hello and then keeps sending decide frames and never
// reads a reply: the sidecar must drop the connection once a reply cannot
// be written for its write timeout (10 s).
func (s *soak) neverReads(ctx context.Context, res *BadResult) {
	f := "bad: " + res.Name
	ws, err := s.sidecar.Dialer().upgrade(ctx)
	if err != nil {
		s.check(f, "connected", false, "%v", err)
		return
	}
	defer ws.Close()
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","id":"h","v":1,"client":"soak-never-reads"}`))
	begin := time.Now()
	sent := 0
	var werr error
	for time.Since(begin) < 60*time.Second {
		_ = ws.SetWriteDeadline(time.Now().Add(60 * time.Second))
		// Each is answered with unknown_query (nothing read, no query id
		// known), a reply the sidecar must write all the same.
		werr = ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"decide","id":"d%d","query_id":"q_unknown","event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":"/etc/passwd"},"tool_use_id":"t%d"}`, sent, sent))
		if werr != nil {
			break
		}
		sent++
	}
	took := time.Since(begin)
	res.Tried = sent
	res.Outcome = fmt.Sprintf("dropped %s after its first frame, %d frames in", took.Round(100*time.Millisecond), sent)
	s.check(f, "the sidecar drops a client that reads none of its replies (write timeout 10 s)", werr != nil && took < 45*time.Second,
		"%d frames sent; the write failed after %s: %v", sent, took.Round(100*time.Millisecond), werr)
}

// burst sends Burst decide frames at once on one connection and reads
// every reply.
func (s *soak) burst(ctx context.Context, res *BadResult) {
	f := "bad: " + res.Name
	c, err := s.sidecar.Dialer().Dial(ctx, "soak-burst")
	if err != nil {
		s.check(f, "connected", false, "%v", err)
		return
	}
	defer func() {
		c.Close()
		<-c.Done()
		s.rec.noteConn(c)
	}()
	o, err := c.Do(ctx, map[string]any{"type": "open_query"}, decideBound)
	if err != nil || o.Type != "query_opened" {
		s.check(f, "opened a query", false, "%v %v", o, err)
		return
	}
	ids := make([]string, 0, s.cfg.Burst)
	for i := range s.cfg.Burst {
		id, err := c.Send(map[string]any{"type": "decide", "query_id": o.QueryID, "event": "PreToolUse", "tool_name": "Bash",
			"tool_input": map[string]any{"command": "id"}, "tool_use_id": fmt.Sprintf("toolu_burst_%d", i)})
		if err != nil {
			break
		}
		ids = append(ids, id)
	}
	counts := map[string]int{}
	var other []string
	for _, id := range ids {
		r, _, _, err := c.Wait(ctx, id, decideBound)
		switch {
		case err != nil:
			counts["lost"]++
		case r.Type == "decision" && r.Rule == "tools.deny_list":
			counts["decision"]++
		case r.Code == "too_many_requests":
			counts["too_many_requests"]++
		default:
			counts["other"]++
			if len(other) < 3 {
				other = append(other, fmt.Sprintf("%s %s %s %s: %s", r.Type, r.Code, r.Decision, r.Rule, r.Reason+r.Message))
			}
		}
	}
	unsol, _, _ := c.Unsolicited()
	res.Tried = len(ids)
	res.Outcome = fmt.Sprintf("%d decided, %d too_many_requests, %d lost, %d other", counts["decision"], counts["too_many_requests"], counts["lost"], counts["other"])
	s.check(f, "every frame of the burst is answered exactly once (a decision or too_many_requests)",
		len(ids) == s.cfg.Burst && counts["decision"]+counts["too_many_requests"] == len(ids) && unsol == 0,
		"%d sent, %s, %d unsolicited; other: %v", len(ids), res.Outcome, unsol, other)
	after, err := c.Do(ctx, map[string]any{"type": "decide", "query_id": o.QueryID, "event": "PreToolUse", "tool_name": "Bash",
		"tool_input": map[string]any{}, "tool_use_id": "toolu_after"}, decideBound)
	s.check(f, "the connection decides normally after the burst", err == nil && after.Rule == "tools.deny_list", "%v %v", after.Rule, err)
}

// badFrames sends oversized frames (each closes its connection with 1009)
// and malformed ones (each gets an error frame; the connection lives).
func (s *soak) badFrames(ctx context.Context, res *BadResult) {
	f := "bad: " + res.Name
	d := s.sidecar.Dialer()
	const oversized = 20
	closed := 0
	for range oversized {
		c, err := d.Dial(ctx, "soak-oversized")
		if err != nil {
			continue
		}
		big := fmt.Appendf(nil, `{"type":"open_query","id":"x","pad":"%s"}`, strings.Repeat("a", 1<<20))
		_ = c.WriteRaw(big)
		<-c.Done()
		var ce *websocket.CloseError
		if errors.As(c.Err(), &ce) && ce.Code == websocket.CloseMessageTooBig {
			closed++
		}
	}
	s.check(f, "an oversized frame closes its connection with 1009", closed == oversized, "%d of %d closed with 1009", closed, oversized)
	ws, err := d.upgrade(ctx)
	if err != nil {
		s.check(f, "connected", false, "%v", err)
		return
	}
	defer ws.Close()
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"hello","id":"h","v":1,"client":"soak-malformed"}`))
	cases := []struct {
		kind  int
		frame string
		code  string
	}{
		{websocket.TextMessage, `{"type":"decide"`, "malformed_frame"},
		{websocket.TextMessage, `[1,2,3]`, "malformed_frame"},
		{websocket.BinaryMessage, `{"type":"open_query","id":"b"}`, "malformed_frame"},
		{websocket.TextMessage, "{\"type\":\"open_query\",\"id\":\"\xff\xfe\"}", "malformed_frame"},
		{websocket.TextMessage, `{"type":"open_query","id":"u","id":"v"}`, "duplicate_key"},
		{websocket.TextMessage, `{"type":"teleport","id":"t"}`, "unknown_type"},
		{websocket.TextMessage, `{"type":"open_query","id":"f","extra":1}`, "unknown_field"},
		{websocket.TextMessage, `{"type":"decide","id":"m"}`, "missing_field"},
		{websocket.TextMessage, `{"type":"hello","id":"v","v":1}`, "hello_repeated"},
		{websocket.TextMessage, `{"type":"open_query","id":"n","sandbox_policy":` + strings.Repeat(`{"a":`, 70) + `1` + strings.Repeat(`}`, 70) + `}`, "invalid_field"},
		{websocket.TextMessage, `{"type":"decide","id":"q","query_id":"q_nope","event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t"}`, "unknown_query"},
	}
	const rounds = 20
	want := map[string]int{"welcome": 1, "query_opened": 1}
	for range rounds {
		for _, tc := range cases {
			_ = ws.WriteMessage(tc.kind, []byte(tc.frame))
			want[tc.code]++
		}
	}
	_ = ws.WriteMessage(websocket.TextMessage, []byte(`{"type":"open_query","id":"last"}`))
	got := map[string]int{}
	total := 0
	for _, n := range want {
		total += n
	}
	var rerr error
	for i := 0; i < total && rerr == nil; i++ {
		_ = ws.SetReadDeadline(time.Now().Add(30 * time.Second))
		var fr Frame
		if rerr = ws.ReadJSON(&fr); rerr == nil {
			if fr.Type == "error" {
				got[fr.Code]++
			} else {
				got[fr.Type]++
			}
		}
	}
	res.Tried = oversized + rounds*len(cases)
	same := rerr == nil && len(got) == len(want)
	for k, n := range want {
		same = same && got[k] == n
	}
	s.check(f, "every malformed frame gets its error frame and the connection lives", same, "got %v, want %v (%v)", got, want, rerr)
	res.Outcome = fmt.Sprintf("%d oversized closed with 1009; %d malformed answered with their error frames, connection kept", closed, rounds*len(cases))
}

// openQueryFlood sends OpenQueryFlood open_query frames on one connection
// (reading the replies) and never closes a query.
func (s *soak) openQueryFlood(ctx context.Context, res *BadResult) {
	f := "bad: " + res.Name
	c, err := s.sidecar.Dialer().Dial(ctx, "soak-query-flood")
	if err != nil {
		s.check(f, "connected", false, "%v", err)
		return
	}
	before, _ := s.sidecar.Metrics(ctx)
	ids := make(chan string, 4096)
	go func() {
		defer close(ids)
		for range s.cfg.OpenQueryFlood {
			id, err := c.Send(map[string]any{"type": "open_query"})
			if err != nil {
				return
			}
			ids <- id
		}
	}()
	counts := map[string]int{}
	var msg string
	for id := range ids {
		r, _, _, err := c.Wait(ctx, id, decideBound)
		switch {
		case err != nil:
			counts["lost"]++
		case r.Type == "query_opened":
			counts["opened"]++
		case r.Code == "too_many_queries":
			counts["too_many_queries"]++
			msg = r.Message
		default:
			counts["other"]++
		}
	}
	during, _ := s.sidecar.Metrics(ctx)
	c.Close()
	<-c.Done()
	s.rec.noteConn(c)
	sent := counts["opened"] + counts["too_many_queries"] + counts["lost"] + counts["other"]
	res.Tried = sent
	res.Outcome = fmt.Sprintf("%d opened, %d refused with too_many_queries", counts["opened"], counts["too_many_queries"])
	s.check(f, "open queries stop at --max-queries-per-conn and every one past it gets too_many_queries naming the cap",
		sent == s.cfg.OpenQueryFlood && counts["opened"] == 1024 && counts["too_many_queries"] == sent-1024 && strings.Contains(msg, "--max-queries-per-conn"),
		"%v; open queries %v → %v; message %q", counts, before["gatekeeper_queries_open"], during["gatekeeper_queries_open"], msg)
}
