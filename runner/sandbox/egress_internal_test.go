package sandbox

import (
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func keyNetwork() runner.Network {
	return runner.Network{Enabled: true, Allow: []string{"api.example"}, Inspect: []string{"api.example"}, BodyPreview: 1024, Secrets: []runner.Secret{
		{Name: "api", Hosts: []string{"api.example"}, Inject: runner.SecretPlace{Header: "Authorization"}, Sentinel: runner.SecretSentinel{Env: "API_TOKEN"}, Value: runner.NewHidden("s3cr3t-XYZ")},
	}}
}

// TestSessionKeyFollowsTheInterceptionNotTheValue: every interception
// setting of a session's sandbox is in its key (a change ends the
// session), the secret's value is not, and the key never holds it.
func TestSessionKeyFollowsTheInterceptionNotTheValue(t *testing.T) {
	t.Parallel()
	key := func(edit func(n *runner.Network)) string {
		n := keyNetwork()
		edit(&n)
		return sessionKey(&Plan{Image: "img", Runtime: runner.Runc, Sandbox: runner.Sandbox{Network: n}})
	}
	base := key(func(*runner.Network) {})
	if strings.Contains(base, "s3cr3t") {
		t.Fatalf("the session key holds the secret's value: %s", base)
	}
	if got := key(func(n *runner.Network) { n.Secrets[0].Value = runner.NewHidden("other") }); got != base {
		t.Errorf("a new value of the same secret changed the key")
	}
	for name, edit := range map[string]func(n *runner.Network){
		"inspect":       func(n *runner.Network) { n.Inspect = nil },
		"body preview":  func(n *runner.Network) { n.BodyPreview = 2048 },
		"name":          func(n *runner.Network) { n.Secrets[0].Name = "api2" },
		"hosts":         func(n *runner.Network) { n.Secrets[0].Hosts = []string{"other.example"} },
		"place":         func(n *runner.Network) { n.Secrets[0].Inject = runner.SecretPlace{Query: "token"} },
		"sentinel env":  func(n *runner.Network) { n.Secrets[0].Sentinel.Env = "TOKEN" },
		"sentinel file": func(n *runner.Network) { n.Secrets[0].Sentinel = runner.SecretSentinel{File: "/tmp/t"} },
		"require":       func(n *runner.Network) { n.Secrets[0].Require = true },
		"a secret less": func(n *runner.Network) { n.Secrets = nil },
	} {
		if key(edit) == base {
			t.Errorf("a change of %s kept the session key", name)
		}
	}
}

// TestPlanEgressMakesSentinelsOncePerSandbox: each plan of an
// intercepting network gets fresh sentinels; a network without
// interception gets none and no launcher files.
func TestPlanEgressMakesSentinelsOncePerSandbox(t *testing.T) {
	t.Parallel()
	a, b := &Plan{Sandbox: runner.Sandbox{Network: keyNetwork()}}, &Plan{Sandbox: runner.Sandbox{Network: keyNetwork()}}
	if p := append(planEgress(a, []byte("CA")), planEgress(b, []byte("CA"))...); len(p) > 0 {
		t.Fatal(p)
	}
	if a.Sentinels["api"] == "" || a.Sentinels["api"] == b.Sentinels["api"] {
		t.Errorf("sentinels %q and %q, want two different ones", a.Sentinels, b.Sentinels)
	}
	n := keyNetwork()
	n.Inspect, n.Secrets = nil, nil
	c := &Plan{Sandbox: runner.Sandbox{Network: n}}
	if p := planEgress(c, nil); len(p) > 0 || c.Egress != nil || c.Sentinels != nil {
		t.Errorf("a plain network: problems %q, egress %+v, sentinels %v", p, c.Egress, c.Sentinels)
	}
	if env := c.NetworkEnv("http://proxy"); len(env) != len(ProxyEnv("")) {
		t.Errorf("a plain network's env %q, want the proxy's only", env)
	}
}
