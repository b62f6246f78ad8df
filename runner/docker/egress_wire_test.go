package docker

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// secretValue is the credential the wiring tests give a run: it must
// never reach the sandbox, its command line, its labels or a message.
const secretValue = "s3cr3t-XYZ"

var sentinelRE = regexp.MustCompile(`^gksentinel_[0-9a-f]{32}$`)

// secretNetwork is a network with two secrets, one whose sentinel is a
// variable and one whose sentinel is a file.
func secretNetwork(allow ...string) runner.Network {
	return runner.Network{Enabled: true, Allow: allow, Inspect: []string{"api.example"}, Secrets: []runner.Secret{
		{Name: "api", Hosts: []string{"api.example"}, Inject: runner.SecretPlace{Header: "Authorization"}, Sentinel: runner.SecretSentinel{Env: "API_TOKEN"}, Require: true, Value: runner.NewHidden(secretValue)},
		{Name: "git", Hosts: []string{"git.example"}, Inject: runner.SecretPlace{Basic: runner.BasicPassword}, Sentinel: runner.SecretSentinel{File: "/tmp/gk/git-token"}, Value: runner.NewHidden(secretValue + "-git")},
	}}
}

// TestInterceptedNetworkContainerSettings: a run with secrets gets its
// sentinels (a variable in its environment, a file its launcher writes),
// the CA and the CA variables; the secret's value is in none of the
// container's settings, its plan or its registration, however they are
// printed.
func TestInterceptedNetworkContainerSettings(t *testing.T) {
	t.Parallel()
	f := newFake("runc")
	r := newFakeNetRunner(t, f, &fakeFirewall{})
	spec := runnertest.Spec("print(1)")
	spec.Sandbox.Network = secretNetwork("api.example", "git.example")
	spec.Labels = map[string]string{"team": "a"}
	p, err := r.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := r.pf.openNetwork(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	defer sn.close()
	cfg, host := r.pf.containerSettings(spec, p, sn)

	api, git := p.Sentinels["api"], p.Sentinels["git"]
	if !sentinelRE.MatchString(api) || !sentinelRE.MatchString(git) || api == git {
		t.Fatalf("sentinels %q", p.Sentinels)
	}
	for _, kv := range []string{"API_TOKEN=" + api, "SSL_CERT_FILE=" + launch.CABundleFile, "NODE_EXTRA_CA_CERTS=" + launch.CAFile, "HTTPS_PROXY=http://" + sn.proxy.String()} {
		if !slices.Contains(cfg.Env, kv) {
			t.Errorf("env lacks %s: %q", kv, cfg.Env)
		}
		if n := strings.Count("\x00"+strings.Join(cfg.Entrypoint, "\x00")+"\x00", "\x00"+kv+"\x00"); n != 1 {
			t.Errorf("the command line carries %s %d times, want once (the program's env -i)", kv, n)
		}
	}
	i := slices.Index(cfg.Entrypoint, "--egress")
	if i < 0 || i+2 >= len(cfg.Entrypoint) {
		t.Fatalf("no --egress in %q", cfg.Entrypoint)
	}
	if ca := (&fakeEgress{}).CACert(); cfg.Entrypoint[i+1] != string(ca) {
		t.Errorf("the launcher's CA %q, want %q", cfg.Entrypoint[i+1], ca)
	}
	if files := cfg.Entrypoint[i+2]; files != "/tmp/gk/git-token\n"+git+"\n" {
		t.Errorf("the launcher's files %q", files)
	}
	if slices.ContainsFunc(cfg.Env, func(kv string) bool { return strings.Contains(kv, git) }) {
		t.Errorf("the file's sentinel is in the environment too: %q", cfg.Env)
	}
	reg := p.Registration(spec)
	if reg.Run.RunID != spec.RunID || reg.Sentinels["api"] != api || len(reg.Network.Secrets) != 2 {
		t.Errorf("registration %+v", reg)
	}

	// Every way the settings may be printed or sent.
	var all strings.Builder
	for _, v := range []any{cfg, host, p, spec, reg, p.Egress, *p.Input} {
		fmt.Fprintf(&all, "%v\n%+v\n%#v\n%s\n", v, v, v, v)
		if b, err := json.Marshal(v); err == nil {
			all.Write(b)
		}
	}
	if strings.Contains(all.String(), secretValue) {
		t.Errorf("the secret's value is in the printed settings")
	}
	if !strings.Contains(all.String(), api) {
		t.Errorf("the check of the printed settings saw no sentinel: it could not fail")
	}
}

// TestInterceptedNetworkPlanRefusals: bad sentinel places and a missing
// CA refuse the run before any container, each problem named, no value.
func TestInterceptedNetworkPlanRefusals(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		edit   func(n *runner.Network)
		noCA   bool
		reason string
	}{
		{"a sentinel file outside /tmp and /workspace", func(n *runner.Network) { n.Secrets[1].Sentinel.File = "/etc/token" }, false, `sentinel file "/etc/token"`},
		{"a sentinel file in the launcher's own directory", func(n *runner.Network) { n.Secrets[1].Sentinel.File = launch.CAFile }, false, "sentinel file"},
		{"a sentinel file that is not clean", func(n *runner.Network) { n.Secrets[1].Sentinel.File = "/tmp/../etc/x" }, false, "sentinel file"},
		{"a sentinel in both places", func(n *runner.Network) { n.Secrets[0].Sentinel.File = "/tmp/x" }, false, "exactly one"},
		{"a sentinel variable the sandbox sets itself", func(n *runner.Network) { n.Secrets[0].Sentinel.Env = "HTTPS_PROXY" }, false, "is taken"},
		{"a sentinel variable that is not a name", func(n *runner.Network) { n.Secrets[0].Sentinel.Env = "A-B" }, false, "not a variable name"},
		{"two secrets of one name", func(n *runner.Network) { n.Secrets[1].Name = "api" }, false, "named twice"},
		{"a proxy without a CA", func(*runner.Network) {}, true, "no CA"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFake("runc")
			r := newFakeNetRunner(t, f, &fakeFirewall{})
			if tc.noCA {
				r.pf.cfg.Egress = noCAEgress{&fakeEgress{}}
			}
			spec := runnertest.Spec("print(1)")
			spec.Sandbox.Network = secretNetwork("api.example")
			tc.edit(&spec.Sandbox.Network)
			_, err := r.Run(t.Context(), spec)
			if err == nil || !strings.Contains(err.Error(), tc.reason) || strings.Contains(fmt.Sprintf("%+v", err), secretValue) {
				t.Fatalf("Run = %v, want a refusal naming %q and no value", err, tc.reason)
			}
			if n := f.count("ContainerCreate"); n != 0 {
				t.Errorf("%d containers created, want none", n)
			}
		})
	}
}

type noCAEgress struct{ *fakeEgress }

func (noCAEgress) CACert() []byte { return nil }
