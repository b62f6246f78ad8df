package docker

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress/egresstest"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// These tests run networked sandboxes with secrets on the real engine,
// under runc and gVisor, through a real egress proxy of their own that
// intercepts the hosts the policy names, with the HTTPS upstreams of
// runner/egress/egresstest on this host (names resolve to 127.0.0.1
// through a test resolver; the proxy verifies them against the test CA).
// What each assertion needs besides the engine is marked:
//   [proxy] interception, the CA, the judge call, forwarding, the rules
//           and Event fields of runner/egress;
//   [swap]  placing, refusing, injecting and scrubbing sentinels
//           (runner/egress/swap);
//   [wire]  sentinels in the program's environment or files, the proxy's
//           CA trusted in the sandbox, the Registration
//           (runner/sandbox, runner/launch, runner/docker).

// secretsResolver maps every upstream name of these tests to loopback.
var secretsResolver = func() egresstest.Resolver {
	m := egresstest.Resolver{}
	for _, n := range []string{"api.test", "other.test", "req.test", "forged.test", "pypi.test", "npm.test", "git.test"} {
		m[n] = []netip.Addr{netip.MustParseAddr("127.0.0.1")}
	}
	return m
}()

// newSecretsRunner is a test Runner whose egress proxy has a CA of its
// own and trusts the test CA upstream.
func newSecretsRunner(t *testing.T, aud egress.Auditor) *Runner {
	t.Helper()
	ca, err := egress.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	p, err := egress.New(egress.Config{Auditor: aud, Resolver: secretsResolver, CA: ca, UpstreamRoots: egresstest.TestCA().Pool()})
	if err != nil {
		t.Fatal(err)
	}
	r := newTestRunner(t)
	r.pf.cfg.Egress = p
	return r
}

// noLeak fails t if data holds a value of values (egresstest.FindLeaks).
func noLeak(t *testing.T, where string, data []byte, values map[string]string) {
	t.Helper()
	for _, l := range egresstest.FindLeaks(data, values) {
		t.Errorf("%s holds %s", where, l)
	}
}

// dumpScript prints, after a marker line, every byte the program can read
// of its environment, every process's environ and cmdline, and every
// regular file below /workspace and /tmp, so that the test can search
// them all for a secret's value.
const dumpScript = `import glob, os, sys
out = sys.stdout.buffer
out.write(b"\n=== DUMP ===\n")
seen = []
def dump(path):
    try:
        with open(path, "rb") as f:
            b = f.read()
    except Exception as e:
        b = ("unreadable: %s" % e).encode()
    seen.append(path)
    out.write(("\n=== %s %d\n" % (path, len(b))).encode())
    out.write(b)
out.write(repr(sorted(os.environ.items())).encode())
for p in sorted(glob.glob("/proc/[0-9]*/environ") + glob.glob("/proc/[0-9]*/cmdline")) + ["/proc/self/environ", "/proc/self/cmdline"]:
    dump(p)
for root in ["/workspace", "/tmp"]:
    for d, dirs, files in os.walk(root):
        for f in files:
            p = os.path.join(d, f)
            if os.path.isfile(p) and not os.path.islink(p):
                dump(p)
out.write(("\n=== FILES %r\n" % seen).encode())
out.flush()
`

// secretsProbe runs in the sandbox: it prints one JSON line per probe,
// then the dump. cfg.json gives the upstreams' ports.
const secretsProbe = `import base64, hashlib, json, os, socket, ssl, sys, urllib.request, urllib.error
cfg = json.load(open("cfg.json"))
E, F = cfg["echo"], cfg["forged"]
os.makedirs("responses", exist_ok=True)
def emit(name, **kw):
    kw["probe"] = name
    print(json.dumps(kw), flush=True)
def err(e):
    return type(e).__name__ + ": " + str(e)

S = {"api_header": os.environ.get("API_TOKEN"), "api_query": os.environ.get("API_QUERY"), "req_key": os.environ.get("REQ_KEY"),
     "api_basic": open("/tmp/basic-token").read(), "api_body": open("/workspace/body-token").read()}
emit("sentinels", **S)

def http(name, method, url, headers=None, data=None, context=None, keep=True):
    req = urllib.request.Request(url, method=method, headers=headers or {}, data=data)
    try:
        with urllib.request.urlopen(req, timeout=60, context=context) as r:
            status, hdrs, body = r.status, dict(r.headers), r.read()
    except urllib.error.HTTPError as e:
        status, hdrs, body = e.code, dict(e.headers), e.read()
    except Exception as e:
        emit(name, error=err(e))
        return
    if keep:
        open("responses/%s.bin" % name.replace(" ", "_"), "wb").write(body)
    try:
        echo = json.loads(body)
        if isinstance(echo, dict) and len(echo.get("body", "")) > 4096:
            echo["body"] = echo["body"][:64]
    except Exception:
        echo = None
    emit(name, status=status, rule=hdrs.get("X-Gatekeeper-Rule"), echo=echo, text=None if echo else body.decode(errors="replace")[:2000])

api = "https://api.test:%d" % E
http("header", "GET", api + "/hdr", {"Authorization": "Bearer " + S["api_header"]})
http("basic", "GET", api + "/basic", {"Authorization": "Basic " + base64.b64encode(("ci:" + S["api_basic"]).encode()).decode()})
http("query", "GET", api + "/q?access_token=" + S["api_query"] + "&x=1")
http("body", "POST", api + "/b", {"Content-Type": "application/json"}, json.dumps({"token": S["api_body"], "n": 1}).encode())
http("wrong host", "GET", "https://other.test:%d/leak" % E, {"Authorization": "Bearer " + S["api_header"]})
http("misplaced", "GET", api + "/mis?access_token=" + S["api_header"])
http("required missing", "GET", "https://req.test:%d/none" % E)
http("required present", "GET", "https://req.test:%d/with" % E, {"X-Api-Key": S["req_key"]})
http("delete", "DELETE", api + "/repos/our-org/x")
http("forged upstream", "GET", "https://forged.test:%d/forged" % F, context=ssl._create_unverified_context())
upload = b"0123456789abcdef" * (10 * 1024 * 1024 // 16)
http("upload", "POST", api + "/upload", {"Content-Type": "application/octet-stream"}, upload, keep=False)

proxy = os.environ["HTTPS_PROXY"]
ph, pp = proxy[len("http://"):].rsplit(":", 1)
def tunnel(host, port):
    s = socket.create_connection((ph, int(pp)), timeout=20)
    s.sendall(("CONNECT %s:%d HTTP/1.1\r\nHost: %s:%d\r\n\r\n" % (host, port, host, port)).encode())
    head = b""
    while b"\r\n\r\n" not in head:
        b = s.recv(1)
        if not b:
            raise EOFError("the proxy closed the tunnel")
        head += b
    status = int(head.split(b" ", 2)[1])
    if status != 200:
        raise RuntimeError("CONNECT answered %d" % status)
    return s
def read_all(s):
    data = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            data += b
    except (socket.timeout, ssl.SSLError, ConnectionError) as e:
        data += ("\n[read ended: %s]" % err(e)).encode()
    return data
def raw(name, request, sni="api.test", context=None):
    try:
        t = (context or ssl.create_default_context()).wrap_socket(tunnel("api.test", E), server_hostname=sni)
        t.sendall(request.encode())
        data = read_all(t)
        t.close()
        head, _, body = data.partition(b"\r\n\r\n")
        status = int(head.split(b" ", 2)[1]) if head.startswith(b"HTTP/") else 0
        emit(name, status=status, head=head.decode(errors="replace"), text=body.decode(errors="replace")[:2000])
    except Exception as e:
        emit(name, error=err(e))
host = "api.test:%d" % E
raw("smuggling", "POST /smuggle HTTP/1.1\r\nHost: %s\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n0\r\n\r\n" % host)
raw("absolute form", "GET https://other.test:%d/abs HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % (E, host))
raw("plain control", "GET /raw HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host)
unchecked = ssl.create_default_context()
unchecked.check_hostname = False
raw("sni mismatch", "GET /sni HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host, sni="other.test", context=unchecked)
raw("pinning", "GET /pin HTTP/1.1\r\nHost: %s\r\nConnection: close\r\n\r\n" % host, context=ssl.create_default_context(cafile="upstream-ca.pem"))

def h2(name, authority, path):
    def frame(typ, flags, sid, payload):
        return len(payload).to_bytes(3, "big") + bytes([typ, flags]) + sid.to_bytes(4, "big") + payload
    def lit(n, v):
        n, v = n.encode(), v.encode()
        return b"\x00" + bytes([len(n)]) + n + bytes([len(v)]) + v
    try:
        ctx = ssl.create_default_context()
        ctx.set_alpn_protocols(["h2"])
        t = ctx.wrap_socket(tunnel("api.test", E), server_hostname="api.test")
        if t.selected_alpn_protocol() != "h2":
            emit(name, error="alpn %r" % t.selected_alpn_protocol())
            return
        block = lit(":method", "GET") + lit(":scheme", "https") + lit(":authority", authority) + lit(":path", path)
        t.sendall(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + frame(4, 0, 0, b"") + frame(1, 0x5, 1, block))
        buf, data, types, done = b"", b"", [], False
        while not done:
            while len(buf) < 9 or len(buf) < 9 + int.from_bytes(buf[:3], "big"):
                b = t.recv(65536)
                if not b:
                    done = True
                    break
                buf += b
            if done:
                break
            n = int.from_bytes(buf[:3], "big")
            typ, flags, sid, payload, buf = buf[3], buf[4], int.from_bytes(buf[5:9], "big") & 0x7fffffff, buf[9:9 + n], buf[9 + n:]
            types.append(typ)
            if typ == 4 and not flags & 1:
                t.sendall(frame(4, 1, 0, b""))
            elif typ == 0 and sid == 1:
                data += payload
                done = bool(flags & 1)
            elif typ == 1 and sid == 1:
                done = bool(flags & 1)
            elif typ in (3, 7):
                done = True
        t.close()
        emit(name, frames=types, text=data.decode(errors="replace")[:2000])
    except Exception as e:
        emit(name, error=err(e))
h2("h2 authority", "other.test:%d" % E, "/h2bad")
h2("h2 control", host, "/h2ok")
emit("done")
exec(open("dump.py").read())
`

// secretsNetwork is the policy of the probe: the echo server under three
// names and the forged upstream, all inspected; four secrets for
// api.test, one in each place, and one required for req.test.
func secretsNetwork(values map[string]string) runner.Network {
	secret := func(name string, place runner.SecretPlace, sentinel runner.SecretSentinel, host string, require bool) runner.Secret {
		return runner.Secret{Name: name, Hosts: []string{host}, Inject: place, Sentinel: sentinel, Require: require, Value: runner.NewHidden(values[name])}
	}
	return runner.Network{
		Enabled: true,
		// The names resolve to loopback, which the proxy reaches only
		// when the literal is listed too.
		Allow:   []string{"api.test", "other.test", "req.test", "forged.test", "127.0.0.1"},
		Inspect: []string{"other.test", "forged.test"},
		// The judge sees the first KiB of a body (the gate's default).
		BodyPreview: 1 << 10,
		Secrets: []runner.Secret{
			secret("api_header", runner.SecretPlace{Header: "Authorization"}, runner.SecretSentinel{Env: "API_TOKEN"}, "api.test", false),
			secret("api_basic", runner.SecretPlace{Basic: runner.BasicPassword}, runner.SecretSentinel{File: "/tmp/basic-token"}, "api.test", false),
			secret("api_query", runner.SecretPlace{Query: "access_token"}, runner.SecretSentinel{Env: "API_QUERY"}, "api.test", false),
			secret("api_body", runner.SecretPlace{Body: true}, runner.SecretSentinel{File: "/workspace/body-token"}, "api.test", false),
			secret("req_key", runner.SecretPlace{Header: "X-Api-Key"}, runner.SecretSentinel{Env: "REQ_KEY"}, "req.test", true),
		},
	}
}

// TestEgressSecrets is not parallel with the package's other tests (its
// 10 MiB upload through the proxy would count in the heap the conformance
// suite's output flood case measures); its two runtimes run in parallel.
func TestEgressSecrets(t *testing.T) { inBothRuntimes(t, testEgressSecrets) }

// inBothRuntimes runs test under runc and gVisor, in parallel.
func inBothRuntimes(t *testing.T, test func(*testing.T, runner.Runtime)) {
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			test(t, rt)
		})
	}
}

func testEgressSecrets(t *testing.T, rt runner.Runtime) {
	values := map[string]string{}
	for _, n := range []string{"api_header", "api_basic", "api_query", "api_body", "req_key"} {
		values[n] = egresstest.SecretValue(t, n)
	}
	aud := &egresstest.Recorder{}
	r := newSecretsRunner(t, aud)
	echo := &egresstest.Echo{}
	srv := egresstest.TLSServer(t, echo, "api.test", "other.test", "req.test")
	forgedEcho := &egresstest.Echo{}
	forged := egresstest.NewCA(t, "forger").Serve(t, forgedEcho, "forged.test")
	cfg, err := json.Marshal(map[string]int{"echo": srv.Port, "forged": forged.Port})
	if err != nil {
		t.Fatal(err)
	}
	judge := &egresstest.Judge{Decide: egresstest.DenyMethods("DELETE")}
	spec := runnertest.Spec(secretsProbe)
	spec.Sandbox.Runtime = rt
	spec.Sandbox.Network = secretsNetwork(values)
	spec.Sandbox.MaxOutputBytes = 16 << 20
	spec.Sandbox.MemoryBytes = 512 << 20
	spec.Requests = judge
	spec.Files = map[string]string{"cfg.json": string(cfg), "upstream-ca.pem": string(egresstest.TestCA().PEM), "dump.py": dumpScript}
	spec.Timeout = 3 * time.Minute

	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	probes, dump, _ := strings.Cut(res.Stdout, "\n=== DUMP ===\n")
	t.Logf("%s: probes:\n%s\nstderr:\n%s", rt, probes, res.Stderr)
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("ended %s %d; stderr %q", res.Reason, res.ExitCode, res.Stderr)
	}
	got := map[string]map[string]any{}
	for line := range strings.Lines(probes) {
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("probe line %q: %v", line, err)
		}
		got[m["probe"].(string)] = m
	}
	if _, ok := got["done"]; !ok {
		t.Fatalf("the probe did not finish: stdout %q stderr %q", probes, res.Stderr)
	}
	probe := func(name string) map[string]any {
		t.Helper()
		m, ok := got[name]
		if !ok {
			t.Errorf("probe %q missing", name)
			return map[string]any{}
		}
		return m
	}
	sentinels := map[string]string{}
	for name, v := range probe("sentinels") {
		if name != "probe" {
			sentinels[name], _ = v.(string)
		}
	}
	received := func(host, path string) []egresstest.EchoRequest {
		var out []egresstest.EchoRequest
		for _, rq := range echo.Requests() {
			if strings.HasPrefix(rq.Host, host+":") && rq.Path == path {
				out = append(out, rq)
			}
		}
		return out
	}
	events := aud.Events()
	event := func(host, path string) (egress.Event, bool) {
		for _, ev := range events {
			if ev.Intercepted && ev.Host == host && ev.Path == path {
				return ev, true
			}
		}
		return egress.Event{}, false
	}
	echoed := func(name string) map[string]any {
		m, _ := probe(name)["echo"].(map[string]any)
		return m
	}
	header := func(echo map[string]any, name string) string {
		hs, _ := echo["headers"].(map[string]any)
		vs, _ := hs[name].([]any)
		if len(vs) != 1 {
			return fmt.Sprint(vs)
		}
		s, _ := vs[0].(string)
		return s
	}

	// [wire] The program holds sentinels, each a fresh random stand-in, in
	// the variables and files the policy named.
	t.Run("the program holds a sentinel for each secret, never its value", func(t *testing.T) {
		if len(sentinels) != len(values) {
			t.Fatalf("sentinels %v, want one for each of %d secrets", sentinels, len(values))
		}
		for name, s := range sentinels {
			if !egresstest.SentinelPattern.MatchString(s) || s == values[name] {
				t.Errorf("sentinel of %s = %q, want gksentinel_<32 hex>", name, s)
			}
		}
	})

	// [proxy][swap][wire] Each place: the upstream received the value,
	// the program read back only the sentinel.
	t.Run("the sentinel is swapped for the value in each place, and the echo is scrubbed", func(t *testing.T) {
		type place struct {
			probe, path, secret string
			upstream            func(egresstest.EchoRequest) string // what the upstream got in the place
			program             func(map[string]any) string         // what the program read back there
			want                func(v string) string               // the place's content holding v
		}
		basicUser := func(auth string) string {
			b, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(auth, "Basic "))
			if err != nil {
				return auth // scrubbed to "Basic <sentinel>"
			}
			return string(b)
		}
		bodyToken := func(body string) string {
			var m map[string]any
			if json.Unmarshal([]byte(body), &m) != nil {
				return "unparsable " + body
			}
			return fmt.Sprint(m["token"])
		}
		query := func(q string) string {
			v, err := url.ParseQuery(q)
			if err != nil {
				return "unparsable " + q
			}
			return v.Get("access_token") + " x=" + v.Get("x")
		}
		for _, p := range []place{
			{"header", "/hdr", "api_header",
				func(rq egresstest.EchoRequest) string { return strings.Join(rq.Headers["Authorization"], ",") },
				func(e map[string]any) string { return header(e, "Authorization") },
				func(v string) string { return "Bearer " + v }},
			{"basic", "/basic", "api_basic",
				func(rq egresstest.EchoRequest) string {
					return basicUser(strings.Join(rq.Headers["Authorization"], ","))
				},
				func(e map[string]any) string { return basicUser(header(e, "Authorization")) },
				func(v string) string { return "ci:" + v }},
			{"query", "/q", "api_query",
				func(rq egresstest.EchoRequest) string { return query(rq.Query) },
				func(e map[string]any) string { q, _ := e["query"].(string); return query(q) },
				func(v string) string { return v + " x=1" }},
			{"body", "/b", "api_body",
				func(rq egresstest.EchoRequest) string { return bodyToken(rq.Body) },
				func(e map[string]any) string { b, _ := e["body"].(string); return bodyToken(b) },
				func(v string) string { return v }},
		} {
			rqs := received("api.test", p.path)
			if len(rqs) != 1 {
				t.Errorf("%s: the upstream received %d requests at %s, want 1", p.probe, len(rqs), p.path)
				continue
			}
			if g, w := p.upstream(rqs[0]), p.want(values[p.secret]); g != w {
				t.Errorf("%s: the upstream received %q, want the value in its place", p.probe, g)
			}
			m := probe(p.probe)
			if m["status"] != float64(200) {
				t.Errorf("%s: %v, want 200", p.probe, m)
				continue
			}
			// The scrubber may give back the encoding the program sent or
			// put the sentinel in the value's place (Basic: "Basic
			// <sentinel>" for the whole base64); either way the program
			// reads its sentinel there, and the leak search below checks
			// it reads no value.
			if g, w := p.program(echoed(p.probe)), p.want(sentinels[p.secret]); g != w && !strings.Contains(g, sentinels[p.secret]) {
				t.Errorf("%s: the program read back %q, want %q (its sentinel)", p.probe, g, w)
			}
			ev, ok := event("api.test", p.path)
			if !ok || ev.Decision != egress.Allow || ev.Status != 200 || !slices.Equal(ev.Secrets, []string{p.secret}) || ev.Rule != egresstest.JudgeAllowRule {
				t.Errorf("%s: audit event %+v (found %v), want an intercepted allow, status 200, secrets [%s], rule %s", p.probe, ev, ok, p.secret, egresstest.JudgeAllowRule)
			}
		}
	})

	// [proxy][swap] Refusals of misplaced, misdirected and missing sentinels.
	t.Run("a sentinel sent elsewhere, out of place, or missing where required is refused", func(t *testing.T) {
		for _, c := range []struct {
			probe, host, path, rule string
		}{
			{"wrong host", "other.test", "/leak", "egress.secret_wrong_host"},
			{"misplaced", "api.test", "/mis", "egress.secret_misplaced"},
			{"required missing", "req.test", "/none", "egress.secret_required"},
		} {
			m := probe(c.probe)
			text, _ := m["text"].(string)
			if m["status"] != float64(403) || m["rule"] != c.rule || !strings.Contains(text, c.rule) {
				t.Errorf("%s: %v, want 403 naming %s", c.probe, m, c.rule)
			}
			if n := len(received(c.host, c.path)); n != 0 {
				t.Errorf("%s: the upstream received %d requests, want none", c.probe, n)
			}
			if ev, ok := event(c.host, c.path); !ok || ev.Decision != egress.Deny || ev.Rule != c.rule || ev.Status != 403 || len(ev.Secrets) != 0 {
				t.Errorf("%s: audit event %+v (found %v), want a deny with rule %s, status 403, nothing injected", c.probe, ev, ok, c.rule)
			}
		}
		rqs := received("req.test", "/with")
		if len(rqs) != 1 || strings.Join(rqs[0].Headers["X-Api-Key"], ",") != values["req_key"] {
			t.Errorf("required present: the upstream received %+v, want the value in X-Api-Key", rqs)
		}
		if g := header(echoed("required present"), "X-Api-Key"); g != sentinels["req_key"] {
			t.Errorf("required present: the program read back %q, want its sentinel", g)
		}
	})

	// [proxy] The judge decides; its refusal is a 403 that says why and not to retry.
	t.Run("a DELETE is refused 403 with the judge's rule in the body", func(t *testing.T) {
		m := probe("delete")
		text, _ := m["text"].(string)
		// The body names the URL (with or without the port), the rule and
		// the reason, and says not to retry.
		want := fmt.Sprintf("/repos/our-org/x: %s: %s.", egresstest.JudgeDenyRule, egresstest.JudgeDenyReason)
		if m["status"] != float64(403) || m["rule"] != egresstest.JudgeDenyRule || !strings.HasPrefix(text, "gatekeeper refused DELETE https://api.test") ||
			!strings.Contains(text, want) || !strings.Contains(text, "do not retry") {
			t.Errorf("delete: %v, want 403, rule %s, a body naming the URL, %q, and saying not to retry", m, egresstest.JudgeDenyRule, want)
		}
		if n := len(received("api.test", "/repos/our-org/x")); n != 0 {
			t.Errorf("the upstream received %d DELETEs", n)
		}
		var saw bool
		for _, rq := range judge.Requests() {
			saw = saw || rq.Method == "DELETE" && rq.Host == "api.test" && rq.Path == "/repos/our-org/x" && rq.Scheme == "https"
		}
		if !saw {
			t.Errorf("the judge never saw the DELETE: %+v", judge.Requests())
		}
		if ev, ok := event("api.test", "/repos/our-org/x"); !ok || ev.Decision != egress.Deny || ev.Rule != egresstest.JudgeDenyRule || ev.Status != 403 || ev.Method != "DELETE" {
			t.Errorf("audit event %+v (found %v), want a deny by %s", ev, ok, egresstest.JudgeDenyRule)
		}
	})

	// [proxy] What the judge was asked.
	t.Run("the judge sees each request with the secrets it would get, and sentinels only", func(t *testing.T) {
		var hdr *runner.HTTPRequest
		reqs := judge.Requests()
		for i := range reqs {
			if reqs[i].Path == "/hdr" {
				hdr = &reqs[i]
			}
		}
		if hdr == nil || hdr.Method != "GET" || hdr.Port != uint16(srv.Port) || !slices.Equal(hdr.Secrets, []string{"api_header"}) || !slices.Contains(hdr.Headers, "Authorization") {
			t.Errorf("the judge's view of the header request: %+v", hdr)
		}
		for _, rq := range reqs {
			if rq.Path == "/b" && !strings.Contains(string(rq.Body), sentinels["api_body"]) {
				t.Errorf("the body preview %q does not hold the body's sentinel", rq.Body)
			}
			if rq.Path == "/upload" && (rq.BodyBytes != 10<<20 || int64(len(rq.Body)) > 64<<10) {
				t.Errorf("the upload's request: %d body bytes, preview of %d", rq.BodyBytes, len(rq.Body))
			}
		}
		noLeak(t, "the judge's requests", fmt.Appendf(nil, "%+v", reqs), values)
	})

	// [proxy] The proxy's own upstream verification, whatever the client skips.
	t.Run("a client skipping verification against a forged upstream is refused by the proxy", func(t *testing.T) {
		m := probe("forged upstream")
		if m["status"] != float64(502) || m["rule"] != egress.RuleUpstreamUnverified {
			t.Errorf("forged upstream: %v, want 502 %s", m, egress.RuleUpstreamUnverified)
		}
		if n := len(forgedEcho.Requests()); n != 0 {
			t.Errorf("the forged upstream received %d requests", n)
		}
		if ev, ok := event("forged.test", "/forged"); !ok || ev.Rule != egress.RuleUpstreamUnverified || ev.Status != 502 {
			t.Errorf("audit event %+v (found %v)", ev, ok)
		}
	})

	// [proxy] No fallback to a tunnel for a client that refuses the proxy's certificate.
	t.Run("a pinning client is refused, never tunnelled", func(t *testing.T) {
		m := probe("pinning")
		e, _ := m["error"].(string)
		if !strings.Contains(e, "CERTIFICATE_VERIFY_FAILED") {
			t.Errorf("pinning: %v, want the client's verification failure", m)
		}
		if n := len(received("api.test", "/pin")); n != 0 {
			t.Errorf("the upstream received %d requests from the pinning client", n)
		}
		var refused bool
		for _, ev := range events {
			refused = refused || ev.Host == "api.test" && ev.Rule == egress.RuleTLSRefused && ev.Decision == egress.Deny
		}
		if !refused {
			t.Errorf("no audited %s for api.test: %+v", egress.RuleTLSRefused, events)
		}
	})

	// [proxy] Requests whose framing or target disagrees with the tunnel.
	t.Run("smuggling, absolute-form and SNI or :authority mismatches are refused", func(t *testing.T) {
		if m := probe("plain control"); m["status"] != float64(200) {
			t.Fatalf("the raw HTTP/1.1 control request: %v, want 200 (the probe itself is broken)", m)
		}
		if m := probe("h2 control"); !strings.Contains(fmt.Sprint(m["text"]), `"path":"/h2ok"`) {
			t.Fatalf("the raw HTTP/2 control request: %v, want the echo (the probe itself is broken)", m)
		}
		for _, c := range []struct {
			probe, rule string
			status      float64
		}{
			{"smuggling", egress.RuleBadRequest, 400},
			// An absolute-form target names the request's host, which is
			// not the one the connection was opened to.
			{"absolute form", egress.RuleHostMismatch, 421},
		} {
			m := probe(c.probe)
			if m["status"] != c.status || !strings.Contains(fmt.Sprint(m["head"]), "X-Gatekeeper-Rule: "+c.rule) {
				t.Errorf("%s: %v, want %v with rule %s", c.probe, m, c.status, c.rule)
			}
		}
		if m := probe("h2 authority"); !strings.Contains(fmt.Sprint(m["text"]), egress.RuleHostMismatch) {
			t.Errorf("h2 authority: %v, want a refusal naming %s", m, egress.RuleHostMismatch)
		}
		if ev, ok := event("api.test", "/h2bad"); !ok || ev.Rule != egress.RuleHostMismatch || ev.Status != 421 || ev.Proto != "HTTP/2.0" {
			t.Errorf("h2 authority: audit event %+v (found %v), want 421 %s over HTTP/2.0", ev, ok, egress.RuleHostMismatch)
		}
		if m := probe("sni mismatch"); m["status"] == float64(200) {
			t.Errorf("sni mismatch: %v, want a refused handshake", m)
		}
		for _, path := range []string{"/smuggle", "/abs", "/h2bad", "/sni"} {
			for _, host := range []string{"api.test", "other.test"} {
				if n := len(received(host, path)); n != 0 {
					t.Errorf("the upstream received %d requests at %s%s", n, host, path)
				}
			}
		}
	})

	// [proxy] A body larger than the preview streams through whole.
	t.Run("a 10 MiB upload passes whole", func(t *testing.T) {
		m := echoed("upload")
		sum := sha256.Sum256(bytes.Repeat([]byte("0123456789abcdef"), 10<<20/16))
		if probe("upload")["status"] != float64(200) || m["body_bytes"] != float64(10<<20) || m["body_sha256"] != hex.EncodeToString(sum[:]) {
			t.Errorf("upload: %v, want the echo of 10 MiB with its digest", probe("upload"))
		}
	})

	// [proxy][swap][wire] The value appears nowhere the run can see.
	t.Run("no value is in anything the run could read or the audit wrote", func(t *testing.T) {
		for _, f := range []string{"/proc/self/environ", "/proc/1/cmdline", "/tmp/basic-token", "/workspace/body-token", "/workspace/responses/header.bin"} {
			if !strings.Contains(dump, "\n=== "+f+" ") {
				t.Errorf("the dump has no %s: the search would miss it", f)
			}
		}
		noLeak(t, "the program's stdout (probes, environment, /proc, every file of /workspace and /tmp)", []byte(res.Stdout), values)
		noLeak(t, "the program's stderr", []byte(res.Stderr), values)
		noLeak(t, "the result", fmt.Appendf(nil, "%+v", res), values)
		noLeak(t, "the audit events", fmt.Appendf(nil, "%+v", events), values)
	})
}

// TestEgressSecretsPackageManagers installs from the egresstest upstreams,
// each behind a credential the program holds only as a sentinel: pip from
// an index with the token in the URL (Basic auth), npm from a registry
// with an .npmrc _authToken (Bearer), git clone over HTTPS with the token
// as the password (Basic, after a 401). Under runc and gVisor.
func TestEgressSecretsPackageManagers(t *testing.T) { inBothRuntimes(t, testPackageManagers) }

func testPackageManagers(t *testing.T, rt runner.Runtime) {
	r := newSecretsRunner(t, &egresstest.Recorder{})
	type tool struct {
		name, image, host, env string
		place                  runner.SecretPlace
		handler                func(value string) (h http.Handler, check func(t *testing.T, stdout string))
		script                 func(port int) string
		files                  func(port int) map[string]string
	}
	tools := []tool{
		{
			name: "pip", image: "python", host: "pypi.test", env: "PYPI_TOKEN", place: runner.SecretPlace{Basic: runner.BasicPassword},
			handler: func(v string) (http.Handler, func(*testing.T, string)) {
				idx := egresstest.NewPyPI(t, egresstest.Auth{User: "ci", Password: v}, "gkdemo", "1.0")
				return idx, func(t *testing.T, out string) {
					if !strings.Contains(out, "Successfully installed gkdemo-1.0") || !strings.Contains(out, idx.Output+"\n") {
						t.Errorf("pip: stdout %q, want gkdemo installed and run", out)
					}
				}
			},
			script: func(port int) string {
				return fmt.Sprintf(`pip install --index-url "https://ci:${PYPI_TOKEN}@pypi.test:%d/simple/" gkdemo && python -m gkdemo`, port)
			},
		},
		{
			name: "npm", image: "node", host: "npm.test", env: "NPM_TOKEN", place: runner.SecretPlace{Header: "Authorization"},
			handler: func(v string) (http.Handler, func(*testing.T, string)) {
				reg := egresstest.NewNPM(t, egresstest.Auth{Bearer: v}, "gkdemo", "1.2.3")
				return reg, func(t *testing.T, out string) {
					if !strings.Contains(out, reg.Output+"\n") {
						t.Errorf("npm: stdout %q, want the installed package's output", out)
					}
					if n := reg.Refused.Load(); n != 0 {
						t.Errorf("npm: the registry refused %d requests (npm sends its token with every one)", n)
					}
				}
			},
			script: func(int) string {
				return `npm install --no-audit --no-fund gkdemo && node -e 'console.log(require("gkdemo")())'`
			},
			files: func(port int) map[string]string {
				return map[string]string{".npmrc": fmt.Sprintf("registry=https://npm.test:%d/\n//npm.test:%d/:_authToken=${NPM_TOKEN}\n", port, port)}
			},
		},
		{
			name: "git", image: "python", host: "git.test", env: "GIT_TOKEN", place: runner.SecretPlace{Basic: runner.BasicPassword},
			handler: func(v string) (http.Handler, func(*testing.T, string)) {
				repo := egresstest.NewGitRepo(t, egresstest.Auth{User: "x-access-token", Password: v}, "demo", map[string]string{"README": "hello from the private repository\n"})
				return repo, func(t *testing.T, out string) {
					if out2 := "hello from the private repository\n" + repo.Commit + "\n"; !strings.HasPrefix(out, out2) {
						t.Errorf("git: stdout %q, want the README and commit %s", out, repo.Commit)
					}
				}
			},
			script: func(port int) string {
				return fmt.Sprintf(`git clone -q "https://x-access-token:${GIT_TOKEN}@git.test:%d/demo.git" demo && cat demo/README && git -C demo rev-parse HEAD`, port)
			},
		},
	}
	for _, tl := range tools {
		t.Run(tl.name, func(t *testing.T) {
			value := egresstest.SecretValue(t, tl.name)
			h, check := tl.handler(value)
			srv := egresstest.TLSServer(t, h, tl.host)
			spec := runnertest.Spec(tl.script(srv.Port) + "\nstatus=$?\npython3 dump.py\nexit $status")
			spec.Language = runner.Shell
			spec.Sandbox.Runtime = rt
			spec.Sandbox.Image = profileImages[tl.image]
			spec.Sandbox.MemoryBytes = 512 << 20
			spec.Sandbox.WorkspaceBytes = 64 << 20
			spec.Sandbox.MaxOutputBytes = 32 << 20
			spec.Timeout = 3 * time.Minute
			spec.Requests = &egresstest.Judge{Decide: egresstest.DenyMethods("DELETE")}
			spec.Sandbox.Network = runner.Network{
				Enabled: true,
				Allow:   []string{tl.host, "127.0.0.1"},
				Secrets: []runner.Secret{{Name: tl.name, Hosts: []string{tl.host}, Inject: tl.place, Sentinel: runner.SecretSentinel{Env: tl.env}, Value: runner.NewHidden(value)}},
			}
			spec.Files = map[string]string{"dump.py": dumpScript}
			if tl.files != nil {
				for k, v := range tl.files(srv.Port) {
					spec.Files[k] = v
				}
			}
			res, err := r.Run(t.Context(), spec)
			if err != nil {
				t.Fatal(err)
			}
			out, _, _ := strings.Cut(res.Stdout, "\n=== DUMP ===\n")
			if res.Reason != runner.Exited || res.ExitCode != 0 {
				t.Fatalf("%s: ended %s %d\nstdout %s\nstderr %s", tl.name, res.Reason, res.ExitCode, out, res.Stderr)
			}
			check(t, out)
			noLeak(t, tl.name+"'s output, environment, /proc and files", []byte(res.Stdout), map[string]string{tl.name: value})
			noLeak(t, tl.name+"'s stderr", []byte(res.Stderr), map[string]string{tl.name: value})
		})
	}
}
