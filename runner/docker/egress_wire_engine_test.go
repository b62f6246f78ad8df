package docker

import (
	"context"
	"encoding/json"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/workspace"
)

// recordingEgress is the real proxy, with the runs it was told of.
type recordingEgress struct {
	*egress.Proxy
	mu    sync.Mutex
	regs  []egress.Registration
	binds []egress.RunIdentity
}

func (e *recordingEgress) Register(addr netip.Addr, reg egress.Registration) error {
	e.mu.Lock()
	e.regs = append(e.regs, reg)
	e.mu.Unlock()
	return e.Proxy.Register(addr, reg)
}

func (e *recordingEgress) Bind(addr netip.Addr, id egress.RunIdentity) error {
	e.mu.Lock()
	e.binds = append(e.binds, id)
	e.mu.Unlock()
	return e.Proxy.Bind(addr, id)
}

var _ sandbox.Egress = (*recordingEgress)(nil)

// sentinelProbe is what a run with secretNetwork sees: its sentinels,
// the CA files, and every place its secret's value could be.
const sentinelProbe = `import glob, json, os, ssl
out = {"env": os.environ.get("API_TOKEN"), "vars": {k: os.environ.get(k) for k in ("SSL_CERT_FILE", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "npm_config_cafile", "NODE_EXTRA_CA_CERTS")}}
out["file"] = open("/tmp/gk/git-token").read()
st = os.stat("/tmp/gk/git-token")
out["mode"], out["own"] = st.st_mode & 0o777, st.st_uid == os.getuid()
out["self_environ"] = open("/proc/self/environ", "rb").read().decode("latin-1")
out["pid1_cmdline"] = open("/proc/1/cmdline", "rb").read().decode("latin-1")
out["sys_store"] = os.path.exists("/etc/ssl/certs/ca-certificates.crt")
out["sys_certs"] = len(ssl.create_default_context(cafile="/etc/ssl/certs/ca-certificates.crt").get_ca_certs()) if out["sys_store"] else 0
out["ca_certs"] = len(ssl.create_default_context(cafile="` + launch.CAFile + `").get_ca_certs())
out["bundle_certs"] = len(ssl.create_default_context(cafile="` + launch.CABundleFile + `").get_ca_certs())
seen = []
for p in glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline"):
    try:
        seen.append(open(p, "rb").read())
    except OSError:
        pass
for top in ("/tmp", "/workspace", "/etc", "/run", "/var", "/home"):
    for d, _, fs in os.walk(top):
        for f in fs:
            f = os.path.join(d, f)
            if os.path.islink(f) or not os.path.isfile(f):
                continue
            try:
                with open(f, "rb") as h:
                    seen.append(h.read(1 << 20))
            except OSError:
                pass
out["searched"] = len(seen)
needle = ("s3c" + "r3t").encode()
out["found"] = [i for i, b in enumerate(seen) if needle in b]
print(json.dumps(out))
`

type probeOut struct {
	Env, File, SelfEnviron, Pid1Cmdline string
	Vars                                map[string]string
	Mode                                int
	Own, SysStore                       bool
	SysCerts, CACerts, BundleCerts      int
	Searched                            int
	Found                               []int
}

func (p *probeOut) UnmarshalJSON(b []byte) error {
	var m struct {
		Env         string            `json:"env"`
		File        string            `json:"file"`
		SelfEnviron string            `json:"self_environ"`
		Pid1Cmdline string            `json:"pid1_cmdline"`
		Vars        map[string]string `json:"vars"`
		Mode        int               `json:"mode"`
		Own         bool              `json:"own"`
		SysStore    bool              `json:"sys_store"`
		SysCerts    int               `json:"sys_certs"`
		CACerts     int               `json:"ca_certs"`
		BundleCerts int               `json:"bundle_certs"`
		Searched    int               `json:"searched"`
		Found       []int             `json:"found"`
	}
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	*p = probeOut(m)
	return nil
}

// TestSecretsReachTheSandboxAsSentinelsOnlyRunc: a networked run with
// secrets sees each one's sentinel (in its variable, in its 0400 file of
// its own), never the value: not in its environment, its files, any
// process's /proc environ or command line (PID 1's included), nor its
// output; the CA and the bundle parse, and the CA variables name them.
// In a session, the next run keeps the sandbox's sentinels and is bound
// to the proxy as its own run; a changed secret ends the session.
func TestSecretsReachTheSandboxAsSentinelsOnlyRunc(t *testing.T) {
	t.Parallel()
	requireRuntime(t, runner.Runc)
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{Auditor: &egresstest.Recorder{}, Resolver: testResolver, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	rec := &recordingEgress{Proxy: p}
	r := newTestRunner(t)
	r.pf.cfg.Egress = rec
	store, err := workspace.OpenStore(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws, err := store.Workspace("q-secrets")
	if err != nil {
		t.Fatal(err)
	}
	run := func(n runner.Network) (probeOut, runner.Result, runner.Spec) {
		t.Helper()
		spec := runnertest.Spec(sentinelProbe)
		spec.Sandbox.Runtime = runner.Runc
		spec.Sandbox.Network = n
		spec.QueryID, spec.Workspace = "q-secrets", ws
		spec.Session = &runner.Session{ID: "q-secrets", IdleTimeout: time.Minute, MaxLifetime: time.Hour}
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		res, err := r.Run(ctx, spec)
		if err != nil || res.Reason != runner.Exited || res.ExitCode != 0 {
			t.Fatalf("run: %v, %s %d (stderr %q)", err, res.Reason, res.ExitCode, res.Stderr)
		}
		if strings.Contains(res.Stdout+res.Stderr, "s3cr3t") {
			t.Errorf("the run's output holds the secret")
		}
		var out probeOut
		if err := json.Unmarshal([]byte(res.Stdout), &out); err != nil {
			t.Fatalf("probe output %q: %v", res.Stdout, err)
		}
		return out, res, spec
	}

	first, _, spec1 := run(secretNetwork("api.example"))
	if !sentinelRE.MatchString(first.Env) || !sentinelRE.MatchString(first.File) || first.Env == first.File {
		t.Errorf("sentinels: env %q, file %q", first.Env, first.File)
	}
	if first.Mode != 0o400 || !first.Own {
		t.Errorf("sentinel file mode %o, owned by the run's user %v; want 0400, true", first.Mode, first.Own)
	}
	if !strings.Contains(first.SelfEnviron, "API_TOKEN="+first.Env) || !strings.Contains(first.Pid1Cmdline, first.Env) {
		t.Errorf("the searches saw no sentinel (environ %q): they could not fail", first.SelfEnviron)
	}
	if len(first.Found) > 0 || first.Searched < 10 {
		t.Errorf("the secret's value is in %d of the %d things the run read", len(first.Found), first.Searched)
	}
	if first.CACerts != 1 || first.BundleCerts != first.SysCerts+1 || (first.SysStore && first.SysCerts == 0) {
		t.Errorf("CA certificates: ca.pem %d, bundle %d, the image's store %v with %d", first.CACerts, first.BundleCerts, first.SysStore, first.SysCerts)
	}
	for _, kv := range (&launch.Egress{}).Env() {
		k, v, _ := strings.Cut(kv, "=")
		if first.Vars[k] != v {
			t.Errorf("%s=%q, want %q", k, first.Vars[k], v)
		}
	}

	second, res2, spec2 := run(secretNetwork("api.example"))
	if res2.Session == nil || res2.Session.Run != 2 {
		t.Fatalf("the second run did not reuse the session: %+v", res2.Session)
	}
	if second.Env != first.Env || second.File != first.File {
		t.Errorf("the session's next run got other sentinels: %q %q, want %q %q", second.Env, second.File, first.Env, first.File)
	}
	rec.mu.Lock()
	regs, binds := rec.regs, rec.binds
	rec.mu.Unlock()
	if len(regs) != 1 || regs[0].Run.RunID != spec1.RunID || regs[0].Sentinels["api"] != first.Env || regs[0].Sentinels["git"] != first.File {
		t.Errorf("registrations %+v, want one of the first run with its sentinels", regs)
	}
	if len(binds) != 1 || binds[0].RunID != spec2.RunID || binds[0].QueryID != "q-secrets" {
		t.Errorf("binds %+v, want the second run's", binds)
	}

	changed := secretNetwork("api.example")
	changed.Secrets[0].Require = false
	third, res3, _ := run(changed)
	if res3.StateLost == nil || res3.StateLost.Reason != runner.EndPolicyChanged {
		t.Errorf("a changed secret kept the session: %+v", res3.StateLost)
	}
	if third.Env == first.Env {
		t.Errorf("a new sandbox kept the old sentinel")
	}
}
