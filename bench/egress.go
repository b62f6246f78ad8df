package bench

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
)

// EgressResult is row 11: what the egress proxy's interception costs one
// HTTPS request from a sandbox. Each side is a real request from Python in
// a real sandbox, through the sidecar's egress proxy, to the same HTTPS
// server on the host: "tunnel" to a host the policy only allowlists
// (CONNECT, then the program's TLS straight to the server, carrying a key
// the program holds), "intercept" to one it inspects and holds a secret
// for (CONNECT, the program's TLS to the proxy with a certificate of the
// sidecar's CA, the request decided by the policy's Rego as event
// http_request, the sentinel swapped for the secret, the proxy's own
// verified TLS to the server, the response scrubbed, an audit line
// written). The server checks that both carry the real key. Everything
// a request costs is inside its sample: the program times each from
// before it connects (or, kept alive, before it sends) to the last byte
// of the body.
type EgressResult struct {
	// Rounds are the runs measured (one round each), Requests each side's
	// requests per round and mode; the two sides alternate which goes
	// first, request by request.
	Rounds   int `json:"rounds"`
	Requests int `json:"requests_per_round"`
	// New opens a connection (CONNECT and TLS) for every request;
	// KeepAlive sends every request of a round on one.
	New       EgressPair `json:"new_connection"`
	KeepAlive EgressPair `json:"keep_alive"`
}

// EgressPair compares the two sides of one mode.
type EgressPair struct {
	Tunnel    Summary `json:"tunnel"`
	Intercept Summary `json:"intercept"`
	// P50 and P99 are intercept over tunnel, over all rounds, with each
	// ratio's least and most over the rounds.
	P50     float64 `json:"p50_ratio"`
	P50Low  float64 `json:"p50_ratio_low"`
	P50High float64 `json:"p50_ratio_high"`
	P99     float64 `json:"p99_ratio"`
	P99Low  float64 `json:"p99_ratio_low"`
	P99High float64 `json:"p99_ratio_high"`
	// AddedP50MS is the p50 intercept adds, in milliseconds.
	AddedP50MS float64 `json:"added_p50_ms"`
}

const (
	egressRounds   = 5
	egressRequests = 30
)

// egressCode is the measuring program: argv-free, it reads the hosts and
// the counts from its files.
const egressCode = `import http.client, json, os, ssl, time
cfg = json.load(open("bench-egress.json"))
proxy = os.environ["HTTPS_PROXY"].split("://", 1)[1].rstrip("/")
ph, pp = proxy.rsplit(":", 1)
ctx = ssl.create_default_context(cafile=os.environ["SSL_CERT_FILE"])
ctx.load_verify_locations(cafile="upstream-ca.pem")
sides = {"tunnel": (cfg["tunnel"], "Bearer " + cfg["key"]), "intercept": (cfg["intercept"], "Bearer " + os.environ["BENCH_TOKEN"])}
def conn(host):
    c = http.client.HTTPSConnection(ph, int(pp), context=ctx, timeout=15)
    h, p = host.rsplit(":", 1)
    c.set_tunnel(h, int(p))
    return c
def get(c, auth):
    c.request("GET", "/item", headers={"Authorization": auth})
    r = c.getresponse()
    body = r.read()
    if r.status != 200:
        raise SystemExit("status %d: %s" % (r.status, body[:300]))
out = {"new": {"tunnel": [], "intercept": []}, "keepalive": {"tunnel": [], "intercept": []}}
kept = {k: conn(v[0]) for k, v in sides.items()}
for i in range(cfg["n"]):
    order = ["tunnel", "intercept"] if i % 2 == 0 else ["intercept", "tunnel"]
    for side in order:
        host, auth = sides[side]
        t0 = time.perf_counter_ns()
        c = conn(host)
        get(c, auth)
        out["new"][side].append((time.perf_counter_ns() - t0) // 1000)
        c.close()
        t0 = time.perf_counter_ns()
        get(kept[side], auth)
        out["keepalive"][side].append((time.perf_counter_ns() - t0) // 1000)
print(json.dumps(out))
`

// egressPolicy allowlists both hosts, inspects one and gives it a secret.
const egressPolicy = `version: 1
workspace_root: %s
tools:
  allow: [mcp__sandboxed_code__run]
secrets:
  bench:
    from_env: BENCH_EGRESS_KEY
    hosts: [%q]
    inject: {header: Authorization}
    sentinel: {env: BENCH_TOKEN}
sandbox:
  net:
    enabled: true
    allow: [%q, %q]
    secrets: [bench]
  proc:
    timeout: 120s
ceilings:
  timeout: 120s
`

// egress measures row 11.
func (e *env) egress(ctx context.Context) error {
	dir := filepath.Join(e.tmp, "egress")
	if err := os.MkdirAll(filepath.Join(dir, "ws"), 0o755); err != nil {
		return err
	}
	// The server's certificates come from a CA of the egress package's
	// own kind, made for this run: a different CA from the sidecar's.
	upstreamCA, err := egress.NewCA()
	if err != nil {
		return err
	}
	caPEM := upstreamCA.CertPEM()
	caFile := filepath.Join(dir, "upstream-ca.pem")
	if err := os.WriteFile(caFile, caPEM, 0o644); err != nil {
		return err
	}
	key := "bench-real-key-" + rand.Text()
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.Header.Get("Authorization") != "Bearer "+key {
				http.Error(w, "wrong key", http.StatusUnauthorized)
				return
			}
			w.Write([]byte(`{"item": 1}`))
		}),
		TLSConfig: &tls.Config{GetCertificate: func(hi *tls.ClientHelloInfo) (*tls.Certificate, error) {
			// The address the client reached: the IP literal it verifies.
			host, _, err := net.SplitHostPort(hi.Conn.LocalAddr().String())
			if err != nil {
				return nil, err
			}
			return upstreamCA.Leaf(host)
		}},
		ReadHeaderTimeout: 10 * time.Second,
	}
	var hosts [2]string
	for i, ip := range []string{"127.0.0.2", "127.0.0.3"} {
		ln, err := net.Listen("tcp", ip+":0")
		if err != nil {
			return err
		}
		hosts[i] = ln.Addr().String()
		go srv.ServeTLS(ln, "", "")
	}
	defer srv.Close()
	tunnel, intercept := hosts[0], hosts[1]
	pol := filepath.Join(dir, "egress.policy.yaml")
	if err := os.WriteFile(pol, fmt.Appendf(nil, egressPolicy, filepath.Join(dir, "ws"), intercept, tunnel, intercept), 0o644); err != nil {
		return err
	}
	sc, c, q, _, err := e.sidecarQuery(ctx, "runc", SidecarOptions{Name: "egress", Policy: pol,
		Args: []string{"--egress-upstream-ca", caFile}, Env: []string{"BENCH_EGRESS_KEY=" + key}})
	if err != nil {
		return err
	}
	defer sc.Stop()
	defer c.Close()
	cfg, _ := json.Marshal(map[string]any{"tunnel": tunnel, "intercept": intercept, "key": key, "n": egressRequests})
	files := map[string]string{"bench-egress.json": string(cfg), "upstream-ca.pem": string(caPEM)}
	var all [2][2][]time.Duration                    // [mode new, keepalive][side tunnel, intercept]
	for round := -1; round < egressRounds; round++ { // round -1 warms up: the leaf certificate, the pool, the page cache
		out, err := c.DecideAndRunRequest(RunRequest{Query: q, ToolUseID: fmt.Sprintf("toolu_bench_egress_%d", round+1),
			Language: "python", Code: egressCode, Files: files, Outputs: []string{}})
		if err != nil {
			return err
		}
		r := out.Result
		if r.ExitCode != 0 {
			return fmt.Errorf("the measuring run exited %d (%s): %.600s %.600s", r.ExitCode, r.Reason, r.Stdout, r.Stderr)
		}
		if strings.Contains(r.Stdout, key) {
			return errors.New("the measuring run's output holds the real key")
		}
		var got map[string]map[string][]int64
		if err := json.Unmarshal([]byte(r.Stdout), &got); err != nil {
			return fmt.Errorf("the measuring run printed no samples: %w: %.300s", err, r.Stdout)
		}
		if round < 0 {
			continue
		}
		for m, mode := range []string{"new", "keepalive"} {
			for s, side := range []string{"tunnel", "intercept"} {
				if len(got[mode][side]) != egressRequests {
					return fmt.Errorf("round %d: %d %s/%s samples, want %d", round, len(got[mode][side]), mode, side, egressRequests)
				}
				for _, us := range got[mode][side] {
					all[m][s] = append(all[m][s], time.Duration(us)*time.Microsecond)
				}
			}
		}
	}
	res := &EgressResult{Rounds: egressRounds, Requests: egressRequests}
	res.New, res.KeepAlive = egressPair(all[0][0], all[0][1]), egressPair(all[1][0], all[1][1])
	e.res.samples["egress/new/tunnel"], e.res.samples["egress/new/intercept"] = all[0][0], all[0][1]
	e.res.Egress = res
	e.cfg.Log.Info("bench: egress", "new_p50", res.New.P50, "new_p99", res.New.P99, "keepalive_p50", res.KeepAlive.P50, "keepalive_p99", res.KeepAlive.P99)
	return nil
}

// egressPair compares intercept with tunnel, samples taken in the same rounds.
func egressPair(tunnel, intercept []time.Duration) EgressPair {
	p := EgressPair{Tunnel: Summarize(tunnel), Intercept: Summarize(intercept)}
	p.P50, p.P99 = Ratio(p.Intercept.P50, p.Tunnel.P50), Ratio(p.Intercept.P99, p.Tunnel.P99)
	p.P50Low, p.P50High = RoundRatios(intercept, tunnel, egressRounds)
	p.P99Low, p.P99High = roundRatiosAt(intercept, tunnel, egressRounds, 99)
	p.AddedP50MS = p.Intercept.P50 - p.Tunnel.P50
	return p
}

// roundRatiosAt is RoundRatios at percentile pct.
func roundRatiosAt(a, b []time.Duration, rounds int, pct float64) (low, high float64) {
	n := min(len(a), len(b))
	if rounds <= 0 || n < rounds {
		return 0, 0
	}
	at := func(s []time.Duration) float64 {
		return ms(Percentile(slices.Sorted(slices.Values(s)), pct))
	}
	for k := range rounds {
		lo, hi := k*n/rounds, (k+1)*n/rounds
		r := Ratio(at(a[lo:hi]), at(b[lo:hi]))
		if k == 0 || r < low {
			low = r
		}
		if k == 0 || r > high {
			high = r
		}
	}
	return low, high
}

// Goals of row 11.
const (
	egressNewGoal       = "an intercepted HTTPS request (TLS terminated, Rego decision, secret swapped, audited), a connection each, p50 ≤ 2× a tunnelled one, every round"
	egressKeepAliveGoal = "the same on a kept-alive connection, p50 ≤ 2× a tunnelled one, every round"
)

// evaluateEgress adds the targets of row 11.
func (r *Results) evaluateEgress() {
	for _, g := range []struct {
		id, goal string
		pair     func(*EgressResult) EgressPair
	}{
		{"egress_intercept_new", egressNewGoal, func(x *EgressResult) EgressPair { return x.New }},
		{"egress_intercept_keepalive", egressKeepAliveGoal, func(x *EgressResult) EgressPair { return x.KeepAlive }},
	} {
		if r.Egress == nil {
			r.target(g.id, g.goal, "not measured", nil)
			continue
		}
		p := g.pair(r.Egress)
		r.target(g.id, g.goal, fmt.Sprintf("%.2f× (rounds %.2f–%.2f×), +%s at p50; p99 %.2f× (rounds %.2f–%.2f×)",
			p.P50, p.P50Low, p.P50High, FormatMS(p.AddedP50MS), p.P99, p.P99Low, p.P99High), ptr(p.P50High > 0 && p.P50High <= 2))
	}
}

// egressRows renders row 11.
func (r *Results) egressRows(row func(...string)) {
	x := r.Egress
	if x == nil {
		row("11", "an HTTPS request from a sandbox, intercepted (TLS terminated, decided, secret swapped) vs tunnelled", "not measured", "", "", "", "")
		return
	}
	pp := func(s Summary) string { return FormatMS(s.P50) + " (p99 " + FormatMS(s.P99) + ")" }
	for _, m := range []struct {
		what, id string
		p        EgressPair
	}{
		{"a new connection (CONNECT and TLS) each", "egress_intercept_new", x.New},
		{"on a kept-alive connection", "egress_intercept_keepalive", x.KeepAlive},
	} {
		row("11", fmt.Sprintf("HTTPS GET from Python in a sandbox through the egress proxy, %s: intercepted (TLS terminated with the sidecar's CA, Rego `http_request` decision, sentinel swapped for the secret, response scrubbed, audit line) vs tunnelled (the program's own TLS to the server, its own key); %d rounds of %d, alternating", m.what, x.Rounds, x.Requests),
			pp(m.p.Intercept), pp(m.p.Tunnel), fmt.Sprintf("%.2f× (rounds %.2f–%.2f×); p99 %.2f× (rounds %.2f–%.2f×)", m.p.P50, m.p.P50Low, m.p.P50High, m.p.P99, m.p.P99Low, m.p.P99High),
			"≤ 2× p50 every round", r.met(m.id))
	}
}
