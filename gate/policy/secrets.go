package policy

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"golang.org/x/net/http/httpguts"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Secret is one entry of the policy's secrets catalog (secrets.<name>): a
// credential a networked run may use but never read (docs/SANDBOX.md,
// "Secrets and request rules"). Its value is never in the policy: the
// sidecar reads FromEnv or FromFile when a run that gets it starts. A run
// gets it when sandbox.net.secrets names it (or an override does, within
// ceilings.secrets).
type Secret struct {
	// FromEnv and FromFile are where the sidecar reads the value, as an
	// mcp_servers value's {from_env} and {from_file}: exactly one is set.
	FromEnv  string `yaml:"from_env" json:"from_env,omitempty"`
	FromFile string `yaml:"from_file" json:"from_file,omitempty"`
	// Hosts are host patterns (net.allow syntax) the value may be sent to;
	// each is intercepted by the egress proxy.
	Hosts []string `yaml:"hosts" json:"hosts"`
	// Inject is where in a request the sentinel is swapped for the value.
	Inject SecretInject `yaml:"inject" json:"inject"`
	// Sentinel is where the run finds its stand-in.
	Sentinel SecretSentinel `yaml:"sentinel" json:"sentinel"`
	// Require refuses a request to Hosts without the sentinel in Inject's
	// place, so that code cannot bring a key of its own.
	Require bool `yaml:"require" json:"require"`
}

// SecretInject is secrets.<name>.inject: exactly one key is set.
type SecretInject struct {
	// Header names the request header that carries the sentinel.
	Header string `yaml:"header" json:"header,omitempty"`
	// Basic is "user", "password" or "either": the part of Basic
	// credentials that carries it.
	Basic string `yaml:"basic" json:"basic,omitempty"`
	// Query names the query parameter that carries it.
	Query string `yaml:"query" json:"query,omitempty"`
	// Body swaps it wherever it appears in the request body.
	Body bool `yaml:"body" json:"body,omitempty"`
}

// SecretSentinel is secrets.<name>.sentinel: exactly one key is set.
type SecretSentinel struct {
	// Env is the environment variable of the program that holds the sentinel.
	Env string `yaml:"env" json:"env,omitempty"`
	// File is the absolute path in the sandbox, below /tmp or /workspace,
	// of a file that holds it.
	File string `yaml:"file" json:"file,omitempty"`
}

// Runner returns the secret named name as the runner takes it, without
// its value (the caller reads it when the run starts).
func (s Secret) Runner(name string) runner.Secret {
	return runner.Secret{
		Name:     name,
		Hosts:    slices.Clone(s.Hosts),
		Inject:   runner.SecretPlace{Header: s.Inject.Header, Basic: s.Inject.Basic, Query: s.Inject.Query, Body: s.Inject.Body},
		Sentinel: runner.SecretSentinel{Env: s.Sentinel.Env, File: s.Sentinel.File},
		Require:  s.Require,
	}
}

// Source describes where the value is read, for messages: "environment
// variable NAME" or "file PATH".
func (s Secret) Source() string {
	if s.FromEnv != "" {
		return "environment variable " + s.FromEnv
	}
	return "file " + s.FromFile
}

// Bounds of sandbox.net.body_preview: what the policy sees of a request
// body is held in memory for each request the proxy decides.
const (
	DefaultBodyPreview = 1 << 10
	MaxBodyPreview     = 64 << 10
)

// secretNameRE is a secret's name in the catalog: it appears in audit
// lines and the policy's input.
var secretNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// launcherEnv are the environment variables the sandbox's launcher sets
// itself, which a sentinel may not name (compared ignoring case; names
// ending in _PROXY and starting with GATEKEEPER_ too): the egress proxy's
// variables, and the CA variables that make the program trust the
// sidecar's CA (docs/SANDBOX.md, "Secrets and request rules").
var launcherEnv = []string{"PATH", "HOME", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE", "PIP_CERT", "GIT_SSL_CAINFO", "NODE_EXTRA_CA_CERTS", "NPM_CONFIG_CAFILE"}

// LauncherEnv reports whether the sandbox's launcher owns the environment
// variable name, so that no sentinel may take it.
func LauncherEnv(name string) bool {
	u := strings.ToUpper(name)
	return slices.Contains(launcherEnv, u) || strings.HasSuffix(u, "_PROXY") || strings.HasPrefix(u, "GATEKEEPER_")
}

// secrets checks the catalog: each entry's source (the mcp_servers value
// check), hosts, inject, sentinel, and no two sentinels in one place.
func (v *validator) secrets(cat map[string]Secret) {
	envs, files := map[string]string{}, map[string]string{}
	for _, name := range slices.Sorted(maps.Keys(cat)) {
		s, pre := cat[name], "secrets."+name
		if !secretNameRE.MatchString(name) {
			v.add(pre, "secret name %q must match %s", name, secretNameRE)
		}
		if s.FromEnv == "" && s.FromFile == "" {
			v.add(pre, "set from_env or from_file: where the sidecar reads the value (never the value itself)")
		}
		v.mcpValue(pre, name, MCPValue{FromEnv: s.FromEnv, FromFile: s.FromFile})
		if len(s.Hosts) == 0 {
			v.add(pre+".hosts", "list at least one host the secret may be sent to")
		}
		v.hostPatterns(pre+".hosts", s.Hosts, nethost.ParseAllow)
		v.secretInject(pre+".inject", s.Inject)
		at := pre + ".sentinel"
		switch sn := s.Sentinel; {
		case (sn.Env == "") == (sn.File == ""):
			v.add(at, "set exactly one of env (a variable of the program) or file (a path in the sandbox)")
		case sn.Env != "" && !envNameRE.MatchString(sn.Env):
			v.add(at+".env", "%q is not an environment variable name", sn.Env)
		case sn.Env != "" && LauncherEnv(sn.Env):
			v.add(at+".env", "%s is set by the sandbox's launcher (PATH, HOME, LANG, GATEKEEPER_*, *_PROXY and the CA variables); choose another name", sn.Env)
		case sn.Env != "" && envs[sn.Env] != "":
			v.add(at+".env", "secret %q already puts its sentinel in %s", envs[sn.Env], sn.Env)
		case sn.File != "" && !sandboxFile(sn.File):
			v.add(at+".file", "%q must be an absolute, clean path below /tmp or /workspace", sn.File)
		case sn.File != "" && files[sn.File] != "":
			v.add(at+".file", "secret %q already puts its sentinel in %s", files[sn.File], sn.File)
		}
		if sn := s.Sentinel; sn.Env != "" && envs[sn.Env] == "" {
			envs[sn.Env] = name
		} else if sn.File != "" && files[sn.File] == "" {
			files[sn.File] = name
		}
	}
}

// secretInject checks that exactly one place is set, and set well.
func (v *validator) secretInject(at string, in SecretInject) {
	n := 0
	for _, set := range []bool{in.Header != "", in.Basic != "", in.Query != "", in.Body} {
		if set {
			n++
		}
	}
	if n != 1 {
		v.add(at, "set exactly one of header: NAME, basic: user|password|either, query: NAME, or body: true")
		return
	}
	switch {
	case in.Header != "" && !httpguts.ValidHeaderFieldName(in.Header):
		v.add(at+".header", "%q is not an HTTP header name", in.Header)
	case in.Header != "" && slices.Contains(transportHeaders, strings.ToLower(in.Header)):
		v.add(at+".header", "%s is a header of the transport, not a credential's place", in.Header)
	case in.Basic != "" && in.Basic != runner.BasicUser && in.Basic != runner.BasicPassword && in.Basic != runner.BasicEither:
		v.add(at+".basic", "%q is not user, password or either", in.Basic)
	case in.Query != "" && strings.ContainsAny(in.Query, "&=#? "):
		v.add(at+".query", "%q is not a query parameter name", in.Query)
	}
}

// sandboxFile reports whether p is an absolute, clean path strictly below
// /tmp or /workspace.
func sandboxFile(p string) bool {
	return path.IsAbs(p) && path.Clean(p) == p && !strings.Contains(p, "..") &&
		(strings.HasPrefix(p, "/tmp/") || strings.HasPrefix(p, "/workspace/"))
}

// netSecrets checks the keys of a sandbox section (the base's or an
// override merged over it) that refer to the catalog: net.secrets names
// entries of it, and every secret's and net.inspect's host is one a
// net.allow pattern admits, since a request to any other never reaches
// the proxy's inspection. In the policy file (base), net.secrets must be
// empty when the network is off; an override may turn the network off
// whatever secrets it inherits, since a run without network gets none.
func (v *validator) netSecrets(s Sandbox, cat map[string]Secret, pre string, base bool) {
	n := s.Net
	v.hostPatterns(pre+"net.inspect", n.Inspect, nethost.ParseAllow)
	if b := n.BodyPreview; b < 0 || b > MaxBodyPreview {
		v.add(pre+"net.body_preview", "%s is out of range: 0 to %s", b, ByteSize(MaxBodyPreview))
	}
	allow := parsedAllow(n.Allow)
	for i, name := range n.Secrets {
		at := fmt.Sprintf("%snet.secrets[%d]", pre, i)
		sec, ok := cat[name]
		switch {
		case !ok:
			known := "it is empty"
			if len(cat) > 0 {
				known = "it has " + strings.Join(slices.Sorted(maps.Keys(cat)), ", ")
			}
			v.add(at, "%q is not a secret of the policy's secrets catalog (%s)", name, known)
			continue
		case slices.Index(n.Secrets, name) < i:
			v.add(at, "%q is listed twice", name)
			continue
		case !n.Enabled && base:
			v.add(at, "secret %q is given to runs that have no network (net.enabled is false)", name)
			continue
		case !n.Enabled:
			continue
		}
		for _, h := range sec.Hosts {
			if !Reachable(h, allow) {
				v.add(at, "secret %q would never be sent: its host %s is admitted by no net.allow pattern", name, h)
			}
		}
	}
	for i, h := range n.Inspect {
		if n.Enabled && !Reachable(h, allow) {
			v.add(fmt.Sprintf("%snet.inspect[%d]", pre, i), "%s would never be inspected: no net.allow pattern admits it", h)
		}
	}
}

func parsedAllow(list []string) []nethost.Pattern {
	out := make([]nethost.Pattern, 0, len(list))
	for _, s := range list {
		if p, err := nethost.ParseAllow(s); err == nil {
			out = append(out, p)
		}
	}
	return out
}

// Reachable reports whether some host the pattern h names is one an allow
// pattern admits: an allow pattern covers h, or h covers it (a wider
// inspect or secret pattern applies to the allowed part). A pattern that
// does not parse reaches nothing.
func Reachable(h string, allow []nethost.Pattern) bool {
	q, err := nethost.ParseAllow(h)
	if err != nil {
		return false
	}
	return slices.ContainsFunc(allow, func(p nethost.Pattern) bool { return p.Covers(q) || q.Covers(p) })
}
