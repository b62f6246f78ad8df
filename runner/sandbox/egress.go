package sandbox

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"path"
	"regexp"
	"sort"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
)

// Egress is what a platform needs of the egress proxy; *egress.Proxy
// satisfies it. The platform serves it on a listener networked sandboxes
// can reach (runner/docker: on each sandbox network's gateway;
// runner/kube: on Config.EgressAddr), registers each networked
// sandbox's address for the length of its run (its sandbox's, for a
// session), and binds a session's sandbox to each later run (RunBinder).
// CACert is the proxy's CA certificate (PEM), which sandboxes whose
// traffic it intercepts trust.
type Egress interface {
	Serve(ctx context.Context, ln net.Listener) error
	Register(addr netip.Addr, reg egress.Registration) error
	Bind(addr netip.Addr, id egress.RunIdentity) error
	Unregister(addr netip.Addr)
	CACert() []byte
}

// RunBinder is an Instance registered with the egress proxy that can be
// handed to another run: a session's sandbox, before each run after its
// first, so that the proxy decides and audits that run's requests as
// its own (egress.Proxy.Bind). An Instance without a network does
// nothing; an error keeps the run from starting.
type RunBinder interface {
	BindRun(spec runner.Spec) error
}

// ProxyEnv is a networked sandbox's proxy environment for the proxy at
// url: upper and lower case, as tools differ in which they read, and an
// empty NO_PROXY so that nothing bypasses the proxy (nothing else is
// reachable anyway).
func ProxyEnv(url string) []string {
	return []string{"HTTP_PROXY=" + url, "HTTPS_PROXY=" + url, "http_proxy=" + url, "https_proxy=" + url, "NO_PROXY=", "no_proxy="}
}

// NetworkEnv is the environment a networked sandbox of p adds to
// launch.Env for the proxy at url: ProxyEnv and, when the proxy
// intercepts its traffic, the CA's variables (launch.Egress.Env) and the
// sentinels that live in variables. It never holds a secret's value.
func (p *Plan) NetworkEnv(url string) []string {
	env := ProxyEnv(url)
	if p.Egress == nil {
		return env
	}
	env = append(env, p.Egress.Env()...)
	for _, s := range p.Sandbox.Network.Secrets {
		if s.Sentinel.Env != "" {
			env = append(env, s.Sentinel.Env+"="+p.Sentinels[s.Name])
		}
	}
	return env
}

// Registration is what the platform registers with the egress proxy for
// the sandbox of p, made for spec's run.
func (p *Plan) Registration(spec runner.Spec) egress.Registration {
	return egress.Registration{Run: RunIdentity(spec), Network: p.Sandbox.Network, Sentinels: p.Sentinels}
}

// RunIdentity is spec's run as the egress proxy knows it.
func RunIdentity(spec runner.Spec) egress.RunIdentity {
	return egress.RunIdentity{RunID: spec.RunID, QueryID: spec.QueryID, Judge: spec.Requests}
}

// intercepts reports whether the proxy terminates some of n's traffic:
// hosts it inspects, or secrets.
func intercepts(n runner.Network) bool {
	return n.Enabled && (len(n.Inspect) > 0 || len(n.Secrets) > 0)
}

// envName is a variable name a sentinel may take.
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// reservedEnv are the variables the sandbox sets itself, which a
// sentinel may not take.
var reservedEnv = func() map[string]bool {
	m := map[string]bool{}
	for _, kv := range append(append(launch.Env(), ProxyEnv("")...), (&launch.Egress{}).Env()...) {
		m[kv[:strings.IndexByte(kv, '=')]] = true
	}
	return m
}()

// planEgress gives p, whose network the proxy intercepts, the sentinels
// of its sandbox (made here, once per sandbox) and what its launcher
// writes (ca: the proxy's CA). It returns the problems with the secrets'
// sentinel places; never a value.
func planEgress(p *Plan, ca []byte) (problems []string) {
	n := p.Sandbox.Network
	if !intercepts(n) {
		return nil
	}
	if len(ca) == 0 {
		problems = append(problems, "the network intercepts hosts but the egress proxy has no CA")
	}
	p.Sentinels = egress.NewSentinels(n.Secrets)
	p.Egress = &launch.Egress{CA: ca, Files: map[string]string{}}
	names, envs := map[string]bool{}, map[string]bool{}
	for _, s := range n.Secrets {
		if names[s.Name] {
			problems = append(problems, fmt.Sprintf("secret %q: named twice", s.Name))
		}
		names[s.Name] = true
		switch env, file := s.Sentinel.Env, s.Sentinel.File; {
		case (env == "") == (file == ""):
			problems = append(problems, fmt.Sprintf("secret %q: its sentinel needs exactly one of env and file", s.Name))
		case env != "" && !envName.MatchString(env):
			problems = append(problems, fmt.Sprintf("secret %q: sentinel env %q is not a variable name", s.Name, env))
		case env != "" && (reservedEnv[env] || envs[env]):
			problems = append(problems, fmt.Sprintf("secret %q: sentinel env %q is taken", s.Name, env))
		case env != "":
			envs[env] = true
		case !sentinelPath(file):
			problems = append(problems, fmt.Sprintf("secret %q: sentinel file %q is not a clean absolute path below %s or %s", s.Name, file, launch.TmpDir, launch.WorkspaceDir))
		case p.Egress.Files[file] != "":
			problems = append(problems, fmt.Sprintf("secret %q: sentinel file %q is taken", s.Name, file))
		default:
			p.Egress.Files[file] = p.Sentinels[s.Name]
		}
	}
	return problems
}

// sentinelPath reports whether f is a path the launcher may write a
// sentinel to: clean, absolute, below /tmp or /workspace, not in the
// launcher's own directory, without a newline.
func sentinelPath(f string) bool {
	if f != path.Clean(f) || strings.ContainsAny(f, "\n\x00") {
		return false
	}
	if f == launch.EgressDir || strings.HasPrefix(f, launch.EgressDir+"/") {
		return false
	}
	return strings.HasPrefix(f, launch.TmpDir+"/") || strings.HasPrefix(f, launch.WorkspaceDir+"/")
}

// egressKey is the part of a session's key that the proxy's interception
// depends on: the inspected hosts, and each secret's name, hosts, place,
// sentinel place and Require; the body preview. Never a value.
func egressKey(n runner.Network) string {
	inspect := append([]string(nil), n.Inspect...)
	sort.Strings(inspect)
	secrets := make([]string, 0, len(n.Secrets))
	for _, s := range n.Secrets {
		hosts := append([]string(nil), s.Hosts...)
		sort.Strings(hosts)
		secrets = append(secrets, fmt.Sprintf("%q %q %q %q %q %t", s.Name, hosts, s.Inject.String(), s.Sentinel.Env, s.Sentinel.File, s.Require))
	}
	sort.Strings(secrets)
	return fmt.Sprintf("%q %q %d", inspect, secrets, n.BodyPreview)
}
