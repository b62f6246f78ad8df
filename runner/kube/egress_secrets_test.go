//go:build kube

package kube

import (
	"encoding/json"
	"net/netip"
	"strconv"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// secretProbe sends the secret's sentinel to the echo server in its
// header, then a DELETE, and prints what it read back as JSON lines, then
// its environment and every process's environ and cmdline it can read.
// ECHO is replaced by the echo server's port.
const secretProbe = `import glob, json, os, urllib.request, urllib.error
def http(method, path, headers):
    req = urllib.request.Request("https://api.test:ECHO" + path, method=method, headers=headers)
    try:
        with urllib.request.urlopen(req, timeout=60) as r:
            return r.status, r.headers.get("X-Gatekeeper-Rule"), r.read().decode(errors="replace")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("X-Gatekeeper-Rule"), e.read().decode(errors="replace")
token = os.environ["API_TOKEN"]
print(json.dumps({"sentinel": token}))
status, rule, body = http("GET", "/hdr", {"Authorization": "Bearer " + token})
print(json.dumps({"probe": "header", "status": status, "rule": rule, "echo": json.loads(body) if status == 200 else body}))
status, rule, body = http("DELETE", "/repos/x", {})
print(json.dumps({"probe": "delete", "status": status, "rule": rule, "body": body}))
print(repr(sorted(os.environ.items())))
for p in sorted(glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")):
    try:
        print(p, open(p, "rb").read())
    except OSError as e:
        print(p, e)
`

// TestSecretsInGVisorPods runs a gVisor Pod with a secret: the echo
// upstream receives the value where the sentinel was, the program reads
// back only the sentinel, and a DELETE is refused 403 with the judge's
// rule. Needs the proxy's interception [proxy], swapping [swap] and the
// Pod's sentinel and CA [wire].
func TestSecretsInGVisorPods(t *testing.T) {
	t.Parallel()
	c := requireCluster(t)
	aud := &egresstest.Recorder{}
	cfg := testConfig(t, aud)
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{
		Auditor:       aud,
		Resolver:      egresstest.Resolver{"api.test": {netip.MustParseAddr("127.0.0.1")}},
		CA:            ca,
		UpstreamRoots: egresstest.TestCA().Pool(),
	})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Egress = p
	r := withRuntime{newTestRunner(t, cfg), runner.Runsc, c.image}
	echo := &egresstest.Echo{}
	srv := egresstest.TLSServer(t, echo, "api.test")
	value := egresstest.SecretValue(t, "api")
	judge := &egresstest.Judge{Decide: egresstest.DenyMethods("DELETE")}

	spec := runnertest.Spec(strings.ReplaceAll(secretProbe, "ECHO", strconv.Itoa(srv.Port)))
	spec.Requests = judge
	spec.Sandbox.MaxOutputBytes = 1 << 20
	spec.Sandbox.Network = runner.Network{
		Enabled: true,
		Allow:   []string{"api.test", "127.0.0.1"},
		Secrets: []runner.Secret{{
			Name: "api", Hosts: []string{"api.test"}, Inject: runner.SecretPlace{Header: "Authorization"},
			Sentinel: runner.SecretSentinel{Env: "API_TOKEN"}, Value: runner.NewHidden(value),
		}},
	}
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("the probe ended %s with %d: stdout %q stderr %q", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	lines := strings.SplitN(res.Stdout, "\n", 4)
	if len(lines) < 4 {
		t.Fatalf("stdout %q: want the sentinel, two probes and the dump", res.Stdout)
	}
	var first struct{ Sentinel string }
	var hdr struct {
		Status int
		Rule   *string
		Echo   egresstest.EchoRequest
	}
	var del struct {
		Status int
		Rule   string
		Body   string
	}
	for i, v := range []any{&first, &hdr, &del} {
		if err := json.Unmarshal([]byte(lines[i]), v); err != nil {
			t.Fatalf("line %q: %v", lines[i], err)
		}
	}
	if !egresstest.SentinelPattern.MatchString(first.Sentinel) {
		t.Errorf("API_TOKEN = %q, want a sentinel", first.Sentinel)
	}
	if got := hdr.Echo.Headers["Authorization"]; hdr.Status != 200 || len(got) != 1 || got[0] != "Bearer "+first.Sentinel {
		t.Errorf("header: %+v, want 200 and the sentinel read back", hdr)
	}
	var upstream []string
	for _, rq := range echo.Requests() {
		upstream = append(upstream, rq.Method+" "+rq.Path+" "+strings.Join(rq.Headers["Authorization"], ","))
	}
	if want := "GET /hdr Bearer " + value; len(upstream) != 1 || upstream[0] != want {
		t.Errorf("the upstream received %q, want one GET with the value", upstream)
	}
	if del.Status != 403 || del.Rule != egresstest.JudgeDenyRule || !strings.Contains(del.Body, egresstest.JudgeDenyRule+": "+egresstest.JudgeDenyReason) {
		t.Errorf("delete: %+v, want 403 with rule %s in the body", del, egresstest.JudgeDenyRule)
	}
	var allowed, denied bool
	for _, ev := range aud.Events() {
		allowed = allowed || ev.RunID == spec.RunID && ev.Intercepted && ev.Path == "/hdr" && ev.Status == 200 && len(ev.Secrets) == 1 && ev.Secrets[0] == "api"
		denied = denied || ev.RunID == spec.RunID && ev.Intercepted && ev.Method == "DELETE" && ev.Status == 403 && ev.Rule == egresstest.JudgeDenyRule
	}
	if !allowed || !denied {
		t.Errorf("audit: allowed header request %v, refused DELETE %v; events %+v", allowed, denied, aud.Events())
	}
	for _, l := range egresstest.FindLeaks([]byte(res.Stdout+res.Stderr), map[string]string{"api": value}) {
		t.Errorf("the run's output (with its environment and /proc) holds %s", l)
	}
}
