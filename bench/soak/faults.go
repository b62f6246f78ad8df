package soak

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/filters"
	"github.com/docker/docker/api/types/network"

	"github.com/gatekeeper-ai/gatekeeper/internal/tmpfs"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// slowCode runs for about secs seconds: a run that is surely in flight
// when a fault strikes.
func slowCode(secs int) string {
	return fmt.Sprintf("import time\ntime.sleep(%d)\nprint('slow done')", secs)
}

// probe makes one sandboxed run on a connection of its own (client
// soak-probe), in a query opened with override (nil: none), and records
// it with the load's records (session 0).
func (s *soak) probe(ctx context.Context, code string, override map[string]any) Record {
	r := Record{Session: 0, Kind: "run", Action: "probe", Sent: time.Now()}
	c, err := s.sidecar.Dialer().Dial(ctx, "soak-probe")
	if err != nil {
		r.Err, r.Cut = "dial: "+err.Error(), true
		return r // a refused dial is not a request
	}
	ps := &Session{ID: 0, conn: c, Rec: s.rec}
	defer ps.drop()
	q := ps.open(ctx, -3, override)
	if q == "" || ps.conn == nil {
		r.Err, r.Cut = "open_query failed", true
		return r
	}
	tu := fmt.Sprintf("toolu_probe_%d", time.Now().UnixNano())
	input := map[string]any{"language": "python", "code": code}
	d := ps.request(ctx, "decide", "run_probe", map[string]any{
		"type": "decide", "query_id": q, "event": "PreToolUse", "tool_name": "mcp__sandboxed_code__run",
		"tool_input": input, "tool_use_id": tu, "mcp_server": map[string]any{"name": "sandboxed_code", "source": "sdk"},
	}, decideBound)
	if ps.conn == nil || d.Reply.Decision != "allow" {
		r.Err = fmt.Sprintf("the probe's decide: %s %s %s", d.Reply.Type, d.Reply.Rule, d.Err)
		return r
	}
	return ps.request(ctx, "run", "probe", map[string]any{"type": "run", "query_id": q, "tool_use_id": tu, "language": "python", "code": code}, runBound)
}

// probeAsync starts a probe and returns its record when it ends.
func (s *soak) probeAsync(ctx context.Context, code string, override map[string]any) <-chan Record {
	ch := make(chan Record, 1)
	go func() { ch <- s.probe(ctx, code, override) }()
	return ch
}

// ended says whether a probe in flight during a fault ended the way the
// issue asks: with a clear error or its result, never a hang.
func ended(r Record) (bool, string) {
	switch {
	case r.Hang:
		return false, "no reply within " + runBound.String()
	case r.Err != "":
		return false, r.Err
	case r.Reply.Type == "error" && r.Reply.Message != "":
		return true, fmt.Sprintf("error %s after %s: %.160s", r.Reply.Code, r.Latency().Round(time.Millisecond), r.Reply.Message)
	case r.Reply.Type == "run_result":
		return true, fmt.Sprintf("run_result %s (exit %d) after %s", r.Reply.Reason, r.Reply.ExitCode, r.Latency().Round(time.Millisecond))
	}
	return false, fmt.Sprintf("%s %s: %s", r.Reply.Type, r.Reply.Code, r.Reply.Message)
}

// runsWorkAgain makes hello-world runs until one succeeds, within bound,
// and returns how long that took.
func (s *soak) runsWorkAgain(ctx context.Context, bound time.Duration) (time.Duration, int, error) {
	begin := time.Now()
	for tries := 1; ; tries++ {
		r := s.probe(ctx, `print("hello soak")`, nil)
		if r.Reply.Type == "run_result" && r.Reply.Reason == "exited" && r.Reply.Stdout == "hello soak\n" {
			return time.Since(begin), tries, nil
		}
		if time.Since(begin) > bound || ctx.Err() != nil {
			return time.Since(begin), tries, fmt.Errorf("no good run within %s (%d tries; last: %s %s %.200s %s)", bound, tries, r.Reply.Type, r.Reply.Code, r.Reply.Message, r.Err)
		}
		sleep(ctx, time.Second)
	}
}

// checkGone checks that every container and network of the instance made
// before t (warm pool containers excepted when keepWarm) is removed
// within 60 s: nothing a fault interrupted is left behind.
func (s *soak) checkGone(ctx context.Context, fault string, t time.Time, keepWarm bool) {
	cli := s.engine.Client()
	label := filters.NewArgs(filters.Arg("label", runner.LabelInstance+"="+instance))
	deadline := time.Now().Add(60 * time.Second)
	var left []string
	for {
		left = left[:0]
		cs, err := cli.ContainerList(ctx, container.ListOptions{All: true, Filters: label})
		if err != nil {
			s.check(fault, "nothing left behind", false, "list containers: %v", err)
			return
		}
		for _, c := range cs {
			if time.Unix(c.Created, 0).Before(t.Truncate(time.Second)) && !(keepWarm && c.Labels[runner.LabelPool] != "") {
				left = append(left, fmt.Sprintf("container %s (%s, %s, run %s, created %s)", c.ID[:12], c.State, c.Status,
					c.Labels[runner.LabelRunID], time.Unix(c.Created, 0).Sub(s.begin).Round(time.Second)))
			}
		}
		ns, err := cli.NetworkList(ctx, network.ListOptions{Filters: label})
		if err != nil {
			s.check(fault, "nothing left behind", false, "list networks: %v", err)
			return
		}
		for _, n := range ns {
			if n.Created.Before(t) {
				left = append(left, "network "+n.Name)
			}
		}
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, time.Second)
	}
	s.check(fault, "nothing made before the fault is left behind (60 s after)", len(left) == 0, "%d left: %s", len(left), strings.Join(left, "; "))
}

// engineRestart restarts the soak's engine under load with a run in
// flight: dockerd stopped with SIGTERM (it stops its containers), then
// started again. Networked runs are held back first, until no sandbox
// network is left: Docker 20.10's dockerd, stopped while it deletes a
// network, keeps that network half-deleted and panics on it at its next
// start (moby#45057, fixed in Docker 24 by moby#45310), and the sidecar
// deletes a network after every networked run. The freeze and the
// sidecar's kill still strike with networked runs in flight.
func (s *soak) engineRestart(ctx context.Context) {
	s.noNet.Store(true)
	defer s.noNet.Store(false)
	deadline := time.Now().Add(60 * time.Second)
	for {
		l, err := s.engine.Leftovers(ctx, instance)
		runs := s.netRuns.Load()
		if err == nil && runs == 0 && len(l.Networks) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			s.check(wEngineRestart, "no networked run under way and no sandbox network left to be deleted when the engine stops (moby#45057)",
				err == nil && runs == 0 && len(l.Networks) == 0, "%d networked runs, %d networks (%v)", runs, len(l.Networks), err)
			break
		}
		sleep(ctx, 250*time.Millisecond)
	}
	s.engineFault(ctx, wEngineRestart, false, func(f string) {
		t0 := time.Now()
		err := s.engine.Stop(60 * time.Second)
		s.check(f, "dockerd stopped with SIGTERM", err == nil, "in %s (%v)", time.Since(t0).Round(time.Millisecond), err)
		err = s.engine.Start(ctx)
		s.check(f, "dockerd started again", err == nil, "%s after the stop began (%v)", time.Since(t0).Round(time.Millisecond), err)
	})
}

// engineFreeze stops dockerd with SIGSTOP for 8 s under load with a run
// in flight.
func (s *soak) engineFreeze(ctx context.Context) {
	s.engineFault(ctx, wEngineFrozen, true, func(f string) {
		err := s.engine.Freeze()
		s.check(f, "dockerd stopped with SIGSTOP", err == nil, "%v", err)
		sleep(ctx, 8*time.Second)
		err = s.engine.Thaw()
		s.check(f, "dockerd resumed with SIGCONT after 8 s", err == nil, "%v", err)
	})
}

// engineFault strikes the engine with a slow run in flight, then checks
// that the run ended (with an error or its result, never a hang), that
// runs work again without restarting the sidecar, and that nothing made
// before the fault is left behind (warm pool containers excepted when
// keepWarm: they outlive a freeze).
func (s *soak) engineFault(ctx context.Context, f string, keepWarm bool, strike func(f string)) {
	start := time.Now()
	pid := s.sidecar.PID()
	inflight := s.probeAsync(ctx, slowCode(4), nil)
	sleep(ctx, 1500*time.Millisecond)
	t0 := time.Now()
	strike(f)
	r := <-inflight
	ok, detail := ended(r)
	s.check(f, "the run in flight ended with a clear error or its result, and did not hang", ok, "%s", detail)
	took, tries, err := s.runsWorkAgain(ctx, 90*time.Second)
	s.check(f, "runs work again without restarting the sidecar", err == nil && s.sidecar.PID() == pid,
		"first good run %s after the engine answered again (%d tries; sidecar pid %d, was %d) %v", took.Round(time.Millisecond), tries, s.sidecar.PID(), pid, err)
	s.window(f, start)
	s.checkGone(ctx, f, t0, keepWarm)
}

// diskTimes are when the audit log's filesystem was full.
type diskTimes struct{ full, free time.Time }

// diskFull fills the audit log's filesystem for 6 s under load.
func (s *soak) diskFull(ctx context.Context) {
	const f = "audit disk full"
	start := time.Now()
	dir := filepath.Join(s.auditDir, "fill")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		s.check(f, "the filesystem filled", false, "%v", err)
		return
	}
	filler, err := tmpfs.FillUp(dir)
	s.check(f, "the audit log's filesystem filled (ENOSPC)", err == nil, "%v", err)
	full := time.Now()
	sleep(ctx, 6*time.Second)
	active := filepath.Join(s.auditDir, "audit.jsonl")
	b, err := os.ReadFile(active)
	s.check(f, "nothing half-written: the active file ends with a whole line", err == nil && len(b) > 0 && b[len(b)-1] == '\n',
		"%d bytes, last byte %q (%v)", len(b), lastByte(b), err)
	if filler != nil {
		if err := filler.Release(-1); err != nil {
			s.check(f, "the space was given back", false, "%v", err)
		}
	}
	os.Remove(dir)
	free := time.Now()
	// Service resumes: a decision sent after the space came back is
	// decided by its rule again.
	deadline := free.Add(30 * time.Second)
	var resumed time.Duration
	for resumed == 0 && time.Now().Before(deadline) {
		for _, r := range s.rec.Records() {
			if r.Kind == "decide" && r.Sent.After(free) && r.Reply.Type == "decision" && r.Reply.Rule != "gatekeeper.error" {
				resumed = r.Got.Sub(free)
				break
			}
		}
		sleep(ctx, 200*time.Millisecond)
	}
	s.check(f, "decisions are decided by their rules again once space returns", resumed > 0, "%s after the space came back", resumed.Round(time.Millisecond))
	s.mu.Lock()
	s.disk = diskTimes{full: full, free: free}
	s.mu.Unlock()
	s.window(f, start)
}

func lastByte(b []byte) byte {
	if len(b) == 0 {
		return 0
	}
	return b[len(b)-1]
}

// swapTimes are the moments of the policy swap.
type swapTimes struct {
	broken, strict, seen, restore, back time.Time
	base, stricter                      string // revisions
}

// waitRevision polls /healthz until it reports a revision for which ok
// holds, within bound.
func (s *soak) waitRevision(ctx context.Context, bound time.Duration, ok func(string) bool) (string, time.Time, error) {
	deadline := time.Now().Add(bound)
	for {
		rev, err := s.sidecar.Revision(ctx)
		if err == nil && ok(rev) {
			return rev, time.Now(), nil
		}
		if time.Now().After(deadline) {
			return rev, time.Now(), fmt.Errorf("still %s after %s (%v)", rev, bound, err)
		}
		sleep(ctx, 20*time.Millisecond)
	}
}

// policySwap replaces the policy file under load with a broken one, then
// a valid stricter one, then the first again.
func (s *soak) policySwap(ctx context.Context) {
	const f = "policy swap"
	start := time.Now()
	base, err := s.sidecar.Revision(ctx)
	if err != nil {
		s.check(f, "the sidecar reports its revision", false, "%v", err)
		return
	}
	var t swapTimes
	t.base = base
	t.broken = time.Now()
	if err := writeAtomic(s.policy, brokenPolicy(s.world.WS)); err != nil {
		s.check(f, "the broken policy was written", false, "%v", err)
		return
	}
	sleep(ctx, 3*time.Second) // six times the watch interval
	rev, err := s.sidecar.Revision(ctx)
	refused := strings.Contains(s.sidecar.Logs(), "policy reload refused")
	s.check(f, "the broken policy is refused and the old one keeps serving", err == nil && rev == base && refused,
		"revision %s (was %s), refusal logged %v", short(rev), short(base), refused)
	t.strict = time.Now()
	if err := writeAtomic(s.policy, policyYAML(Strict, s.world.WS)); err != nil {
		s.check(f, "the stricter policy was written", false, "%v", err)
		return
	}
	t.stricter, t.seen, err = s.waitRevision(ctx, 15*time.Second, func(r string) bool { return r != base })
	s.check(f, "the stricter policy takes effect", err == nil, "revision %s %s after the write (%v)", short(t.stricter), t.seen.Sub(t.strict).Round(time.Millisecond), err)
	s.mu.Lock()
	s.revisions[t.stricter] = Strict
	s.mu.Unlock()
	sleep(ctx, 5*time.Second)
	t.restore = time.Now()
	if err := writeAtomic(s.policy, policyYAML(Base, s.world.WS)); err != nil {
		s.check(f, "the base policy was written back", false, "%v", err)
		return
	}
	_, t.back, err = s.waitRevision(ctx, 15*time.Second, func(r string) bool { return r == base })
	s.check(f, "the base policy takes effect again", err == nil, "%s after the write (%v)", t.back.Sub(t.restore).Round(time.Millisecond), err)
	s.mu.Lock()
	s.swaps = t
	s.mu.Unlock()
	s.window(f, start)
}

func short(rev string) string {
	if len(rev) > 19 {
		return rev[:19]
	}
	return rev
}

// killTimes are the moments of the sidecar's SIGKILL.
type killTimes struct{ kill, up time.Time }

// killBound bounds the wait for the kill's precondition: the probes of
// sidecarKill sleep killProbeSecs, well past it, so that they are still in
// flight when it holds.
const (
	killBound     = 30 * time.Second
	killProbeSecs = 45
)

// killProbe is the override of sidecarKill's probes: a timeout that
// outlasts their sleep (the ceilings allow 60 s), the network on for the
// networked one.
func killProbe(net bool) map[string]any {
	o := map[string]any{"proc": map[string]any{"timeout": fmt.Sprintf("%ds", killProbeSecs+10)}}
	if net {
		o["net"] = netOverride["net"]
	}
	return o
}

// sidecarKill kills the sidecar with runs (one networked) in flight, keeps
// it down for 3 s, and starts it again with the same flags. The kill waits
// (up to killBound) until what it is to interrupt exists: the probes in
// flight, and the engine holding the instance's containers, a sandbox
// network and its firewall rules. Under load a networked run takes seconds
// to reach its container; a kill on a timer would often find none.
func (s *soak) sidecarKill(ctx context.Context) {
	const f = "sidecar SIGKILL"
	start := time.Now()
	slow := newInFlight(s.probeAsync(ctx, slowCode(killProbeSecs), killProbe(false)))
	netted := newInFlight(s.probeAsync(ctx, slowCode(killProbeSecs), killProbe(true)))
	var before Leftovers
	waited, detail, err := awaitPrecondition(ctx, killBound, 250*time.Millisecond, func() (bool, string, error) {
		for i, p := range []*inFlight{slow, netted} {
			if r, done := p.ended(); done {
				_, how := ended(r)
				return false, "", fmt.Errorf("%s ended before the kill: %s", []string{"the probe", "the networked probe"}[i], how)
			}
		}
		var err error
		before, err = s.engine.Leftovers(ctx, instance)
		if err != nil {
			return false, "", err
		}
		return len(before.Containers) > 0 && len(before.Networks) > 0 && before.Rules > 0,
			fmt.Sprintf("%d containers (%d warm), %d networks, %d firewall rules", len(before.Containers), before.Warm, len(before.Networks), before.Rules), nil
	})
	s.check(f, "the sidecar has containers, a network and firewall rules at the kill", err == nil,
		"%s, after waiting %s for them (at most %s) %s", detail, waited.Round(time.Millisecond), killBound, errOrNil(err))
	oldPID := s.sidecar.PID()
	var t killTimes
	t.kill = time.Now()
	s.sidecar.Kill()
	left, _ := s.engine.Leftovers(ctx, instance)
	failsBefore := s.rec.dialFailures.Load()
	sleep(ctx, 3*time.Second)
	_, dialErr := s.sidecar.Dialer().Dial(ctx, "soak-while-down")
	s.check(f, "clients fail closed while it is down", dialErr != nil && s.rec.dialFailures.Load() > failsBefore,
		"a dial got %v; the sessions' failed reconnections while down: %d", dialErr, s.rec.dialFailures.Load()-failsBefore)
	err = s.sidecar.Start(ctx)
	t.up = time.Now()
	s.check(f, "the sidecar started again with the same flags", err == nil, "pid %d (was %d) %v", s.sidecar.PID(), oldPID, err)
	if err != nil {
		s.window(f, start)
		return
	}
	gone, err := s.engine.Exists(ctx, left.Containers, left.Networks)
	now, _ := s.engine.Leftovers(ctx, instance)
	var oldRules []string
	for _, id := range left.RuleIDs {
		if slices.Contains(now.RuleIDs, id) {
			oldRules = append(oldRules, id)
		}
	}
	s.check(f, "the restarted sidecar removed the old instance's containers, networks and firewall rules",
		err == nil && len(gone) == 0 && len(oldRules) == 0,
		"of %d containers, %d networks and the rules of %d networks at the kill, left: %v, rules of %v (%v)",
		len(left.Containers), len(left.Networks), len(left.RuleIDs), gone, oldRules, err)
	for _, p := range []*inFlight{slow, netted} {
		r := p.wait()
		s.check(f, "a run in flight at the kill fails closed on the client (connection lost, no result)", r.Cut && r.Reply.Type == "",
			"cut %v, reply %q, err %s", r.Cut, r.Reply.Type, r.Err)
	}
	// Clients reconnect: every session makes a request that is answered
	// after the restart.
	deadline := t.up.Add(45 * time.Second)
	var waiting []int
	for {
		waiting = waiting[:0]
		back := map[int]bool{}
		for _, r := range s.rec.Records() {
			if r.Sent.After(t.up) && r.Reply.Type != "" {
				back[r.Session] = true
			}
		}
		for _, ss := range s.sessions {
			if !back[ss.ID] {
				waiting = append(waiting, ss.ID)
			}
		}
		if len(waiting) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			break
		}
		sleep(ctx, 250*time.Millisecond)
	}
	s.check(f, "every session reconnected and is answered again", len(waiting) == 0, "sessions still without an answer 45 s after the restart: %v", waiting)
	s.mu.Lock()
	s.kill = t
	s.mu.Unlock()
	s.window(f, start)
}

// awaitPrecondition polls cond every poll until it holds, fails, ctx
// ends or bound passes, and returns how long it waited and cond's last
// detail. It is an error when cond never held: cond's own, or one naming
// the bound.
func awaitPrecondition(ctx context.Context, bound, poll time.Duration, cond func() (bool, string, error)) (time.Duration, string, error) {
	begin := time.Now()
	for {
		ok, detail, err := cond()
		switch {
		case err != nil:
			return time.Since(begin), detail, err
		case ok:
			return time.Since(begin), detail, nil
		case ctx.Err() != nil:
			return time.Since(begin), detail, ctx.Err()
		case time.Since(begin) >= bound:
			return time.Since(begin), detail, fmt.Errorf("the precondition did not hold within %s", bound)
		}
		sleep(ctx, poll)
	}
}

// inFlight is a probe's record to come, which can be asked for without
// waiting.
type inFlight struct {
	ch   <-chan Record
	r    Record
	done bool
}

func newInFlight(ch <-chan Record) *inFlight { return &inFlight{ch: ch} }

// ended returns the probe's record if it has ended.
func (p *inFlight) ended() (Record, bool) {
	if !p.done {
		select {
		case p.r = <-p.ch:
			p.done = true
		default:
		}
	}
	return p.r, p.done
}

// wait waits for the probe's record.
func (p *inFlight) wait() Record {
	if !p.done {
		p.r, p.done = <-p.ch, true
	}
	return p.r
}

// errOrNil is err for a check's detail, or nothing.
func errOrNil(err error) string {
	if err == nil {
		return ""
	}
	return "(" + err.Error() + ")"
}
