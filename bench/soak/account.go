package soak

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// Resources compares the idle sidecar before the load with the idle
// sidecar after it.
type Resources struct {
	Name                  string  `json:"name"`
	GoroutinesBefore      float64 `json:"goroutines_before"`
	GoroutinesAfter       float64 `json:"goroutines_after"`
	FDsBefore             float64 `json:"fds_before"`
	FDsAfter              float64 `json:"fds_after"`
	HeapBefore, HeapAfter float64 // live heap after a collection
	RSSBefore, RSSAfter   int64
	Containers, Warm      int
	Networks, Rules       int
}

// gcAndSample collects the sidecar's garbage (its heap profile with
// gc=1, through --debug-endpoints) and then samples it, so that the heap
// figure is the live heap. The heap profile is kept in the work directory
// as heap-NAME.pb.gz (compare two with go tool pprof -base).
func (s *soak) gcAndSample(ctx context.Context, name string) (Sample, error) {
	for range 2 { // sync.Pools survive one collection in their victim cache
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gatekeeper/debug/pprof/heap?gc=1", nil)
		req.Header.Set("Authorization", "Bearer "+s.sidecar.Token)
		resp, err := s.sidecar.http.Do(req)
		if err != nil {
			return Sample{}, err
		}
		b, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			return Sample{}, fmt.Errorf("heap profile: %s %v", resp.Status, err)
		}
		_ = os.WriteFile(filepath.Join(s.cfg.Work, "heap-"+name+".pb.gz"), b, 0o644)
	}
	return s.sidecar.Sample(ctx)
}

// idle pauses the raw sessions (closing their connections) and waits for
// the sidecar to settle; it returns the settled, collected reading.
func (s *soak) idle(ctx context.Context, name string) (Sample, error) {
	if _, err := s.settle(ctx); err != nil {
		return Sample{}, err
	}
	return s.gcAndSample(ctx, name)
}

// compare checks an idle reading against the baseline: the same
// goroutines and fds (a small slack for the warm pool refilling), a live
// heap that did not grow with the load, no connection or query left, and
// of the instance's containers only the warm pool's.
func (s *soak) compare(ctx context.Context, name string, after Sample) Resources {
	b := s.baseline
	// A goroutine that outlives the settling (a warm container being
	// made, a removal retried) is not a leak if it ends: wait up to 60 s
	// for the count to come back, with a dump from the moment it was high.
	waited := time.Duration(0)
	for after.Goroutines > b.Goroutines+2 && waited < 60*time.Second && ctx.Err() == nil {
		if waited == 0 {
			s.saveGoroutines(ctx, name+"-high")
		}
		sleep(ctx, time.Second)
		waited += time.Second
		if cur, err := s.sidecar.Sample(ctx); err == nil {
			after.Goroutines = cur.Goroutines
		}
	}
	r := Resources{Name: name, GoroutinesBefore: b.Goroutines, GoroutinesAfter: after.Goroutines, FDsBefore: b.FDs, FDsAfter: after.FDs,
		HeapBefore: b.HeapAlloc, HeapAfter: after.HeapAlloc, RSSBefore: b.RSS, RSSAfter: after.RSS}
	l, err := s.engine.Leftovers(ctx, instance)
	r.Containers, r.Warm, r.Networks, r.Rules = len(l.Containers), l.Warm, len(l.Networks), l.Rules
	if r.Containers > r.Warm {
		s.note("%s: containers of the instance besides the warm pool's: %v", name, l.Containers)
	}
	// Which goroutines were counted, by top frame, and which grew.
	groups := goroutineGroups(s.saveGoroutines(ctx, name))
	change := groupChange(s.baseGoroutines, groups)
	if change == "" {
		change = "none"
	}
	s.check(name, "goroutines back to the baseline (±2)", after.Goroutines <= b.Goroutines+2,
		"%.0f before, %.0f after (%s more waited); changed from the baseline, by top frame: %s; counted after: %s",
		b.Goroutines, after.Goroutines, waited, change, countedGroups(groups))
	s.check(name, "open fds back to the baseline (±2)", after.FDs <= b.FDs+2, "%.0f before, %.0f after", b.FDs, after.FDs)
	s.check(name, "the live heap did not grow with the load (≤ 1.5× + 4 MiB)", after.HeapAlloc <= 1.5*b.HeapAlloc+4<<20,
		"%.1f MiB before, %.1f MiB after (RSS %d → %d MiB)", b.HeapAlloc/(1<<20), after.HeapAlloc/(1<<20), b.RSS>>20, after.RSS>>20)
	s.check(name, "no connection or query left open", after.Conns == 0 && after.Queries == 0, "%.0f connections, %.0f queries", after.Conns, after.Queries)
	s.check(name, "of the instance's containers, networks and firewall rules only the warm pool is left", err == nil && r.Containers == r.Warm && r.Networks == 0 && r.Rules == 0,
		"%d containers (%d warm), %d networks, %d rules (%v)", r.Containers, r.Warm, r.Networks, r.Rules, err)
	return r
}

// goroutineDump fetches the sidecar's goroutine profile (debug=1: the
// goroutines grouped by stack, with counts).
func (s *soak) goroutineDump(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gatekeeper/debug/pprof/goroutine?debug=1", nil)
	req.Header.Set("Authorization", "Bearer "+s.sidecar.Token)
	resp, err := s.sidecar.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err == nil && resp.StatusCode != http.StatusOK {
		err = fmt.Errorf("goroutine profile: %s", resp.Status)
	}
	return string(b), err
}

// saveGoroutines writes the sidecar's goroutine dump next to the logs and
// returns it ("" when it could not be read).
func (s *soak) saveGoroutines(ctx context.Context, name string) string {
	dump, err := s.goroutineDump(ctx)
	if err != nil {
		return ""
	}
	path := filepath.Join(s.cfg.Work, "goroutines-"+strings.NewReplacer(" ", "-", "(", "", ")", "", ",", "").Replace(name)+".txt")
	_ = os.WriteFile(path, []byte(dump), 0o644)
	return dump
}

// goroutineGroups counts the goroutines of a debug=1 goroutine profile by
// their top frame (runtime frames are left out there): "function
// (file:line)".
func goroutineGroups(dump string) map[string]int {
	groups := map[string]int{}
	for block := range strings.SplitSeq(dump, "\n\n") {
		lines := strings.Split(strings.TrimSpace(block), "\n")
		// The first block starts with the profile's header line.
		for len(lines) > 0 && !strings.Contains(lines[0], " @ ") {
			lines = lines[1:]
		}
		var n int
		if len(lines) == 0 {
			continue
		}
		if _, err := fmt.Sscanf(lines[0], "%d @", &n); err != nil {
			continue
		}
		top := "(no frame)"
		for _, l := range lines[1:] {
			f := strings.Split(l, "\t")
			if len(f) == 4 && f[0] == "#" {
				fn, _, _ := strings.Cut(f[2], "+0x")
				top = fmt.Sprintf("%s (%s)", fn, filepath.Base(strings.TrimSpace(f[3])))
				break
			}
		}
		groups[top] += n
	}
	return groups
}

// groupChange says which groups of goroutines grew or shrank from before
// to after, the largest change first ("" when none did).
func groupChange(before, after map[string]int) string {
	type change struct {
		top string
		d   int
	}
	var cs []change
	for top, n := range after {
		if d := n - before[top]; d != 0 {
			cs = append(cs, change{top, d})
		}
	}
	for top, n := range before {
		if _, ok := after[top]; !ok {
			cs = append(cs, change{top, -n})
		}
	}
	slices.SortFunc(cs, func(a, b change) int {
		if c := cmp.Compare(max(b.d, -b.d), max(a.d, -a.d)); c != 0 {
			return c
		}
		return strings.Compare(a.top, b.top)
	})
	var parts []string
	for _, c := range cs {
		parts = append(parts, fmt.Sprintf("%+d %s", c.d, c.top))
	}
	return strings.Join(parts, ", ")
}

// countedGroups lists the groups of a count, the largest first.
func countedGroups(g map[string]int) string {
	tops := make([]string, 0, len(g))
	for top := range g {
		tops = append(tops, top)
	}
	slices.SortFunc(tops, func(a, b string) int {
		if c := cmp.Compare(g[b], g[a]); c != 0 {
			return c
		}
		return strings.Compare(a, b)
	})
	var parts []string
	for _, top := range tops {
		parts = append(parts, fmt.Sprintf("%d %s", g[top], top))
	}
	return strings.Join(parts, ", ")
}

// leakCheck is the first leak check: with the raw sessions paused and the
// first batch of SDK sessions ended, the same sidecar process that served
// the load and the faults so far is compared with itself before the load.
// Then the load resumes and a second batch of SDK sessions starts.
func (s *soak) leakCheck(ctx context.Context) {
	s.gate.Pause(len(s.sessions))
	s.sdkResults = append(s.sdkResults, s.sdk.wait())
	after, err := s.idle(ctx, "leak-check")
	if err != nil {
		s.check("leak check", "the sidecar answers", false, "%v", err)
	} else {
		s.leaks = append(s.leaks, s.compare(ctx, fLeak, after))
	}
	s.gate.Resume()
	s.sdk = s.startSDK(s.load)
}

// auditLine is an audit record with where it is.
type auditLine struct {
	audit.Record
	file string
}

// readAudit reads every line of the audit set, compressed files included.
func readAudit(active string) ([]auditLine, []audit.File, error) {
	files, err := audit.Files(active)
	if err != nil {
		return nil, nil, err
	}
	var out []auditLine
	for l, err := range audit.Lines(files) {
		if err != nil {
			return out, files, err
		}
		var r audit.Record
		if err := json.Unmarshal(l.Text, &r); err != nil {
			return out, files, fmt.Errorf("%s:%d: %w", l.File.Path, l.Number, err)
		}
		out = append(out, auditLine{Record: r, file: filepath.Base(l.File.Path)})
	}
	return out, files, nil
}

// verifyAudit runs `gatekeeper audit verify --head` over the set, as an
// operator would.
func (s *soak) verifyAudit(ctx context.Context) (string, error) {
	out, err := exec.CommandContext(ctx, s.cfg.Gatekeeper, "audit", "verify", "--head", s.headFile, filepath.Join(s.auditDir, "audit.jsonl")).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// Accounting is every request counted on both sides.
type Accounting struct {
	Requests    int   `json:"requests"`    // sent by the load sessions and probes
	Answered    int   `json:"answered"`    // got exactly one terminal reply
	CutByKill   int   `json:"cut_by_kill"` // in flight when the sidecar was killed
	Stopped     int   `json:"stopped"`     // in flight when the load stopped
	Lost        int   `json:"lost"`        // neither: must be 0
	Hangs       int   `json:"hangs"`       // no reply within the bound: must be 0
	Unsolicited int64 `json:"unsolicited"` // replies nobody asked for: must be 0
	// UnsolicitedSamples are a few of them, to say which.
	UnsolicitedSamples []string `json:"unsolicited_samples,omitempty"`
	Late               int64    `json:"late"` // replies after the load stopped, to requests abandoned then
	// Wrong is the sum of the four below: each must be 0.
	Wrong              int            `json:"wrong"`
	WrongAnswers       int            `json:"wrong_answers"`       // answered otherwise than the policy and the faults allow
	DecisionMismatches int            `json:"decision_mismatches"` // decisions not in the audit log once, as answered
	RunMismatches      int            `json:"run_mismatches"`      // runs not in the audit log once, with their outcome
	FailClosed         map[string]int `json:"fail_closed"`         // answers a fault turned into a refusal, by why
	DialFails          int64          `json:"dial_failures"`

	AuditLines     int `json:"audit_lines"`
	AuditFiles     int `json:"audit_files"`
	Rotations      int `json:"rotations"`
	DecisionsMatch int `json:"decisions_matched"` // replies found once, equal, in the audit log
	// DecisionsUnaudited are denied with gatekeeper.error naming the
	// audit log while its disk was full, and not in it.
	DecisionsUnaudited int    `json:"decisions_unaudited"`
	RunsAudited        int    `json:"runs_audited"`   // runs found once, with their outcome
	RunsUnaudited      int    `json:"runs_unaudited"` // runs whose record could not be written (disk full, kill): each answered with an error or cut
	AuditOrphans       int    `json:"audit_orphans"`  // audit lines of the load no request explains: must be 0
	Verify             string `json:"verify"`

	SDKCalls, SDKOK, SDKFailClosed, SDKWrong int
}
