// The network-enabled part of walkthroughs 2 and 4. Two upstreams on the
// host's loopback stand for the internet: "allowed" on 127.0.0.2 (which the
// policy allowlists) and "denied" on 127.0.0.3 (which it does not). Sandbox
// code with the network turned on must reach the first through gatekeeper's
// egress proxy and nothing else.
//
// Until the runner can enforce a network policy, a network-enabled run must
// be refused (runner_unavailable, "network policy not supported"), never
// run with an unfiltered network; checkEgress asserts whichever of the two
// the sidecar does, and says which in the transcript.

import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { probeLines, RUN, type Outcome, type Step } from './agent.js';
import type { Transcript } from './transcript.js';
import { containersOf, networksOf } from './world.js';

/** Upstream is one loopback HTTP server that counts its requests. */
export interface Upstream {
  host: string;
  port: number;
  /** host:port, as a policy names it. */
  hostPort: string;
  /** The body it answers. */
  body: string;
  hits: number;
  close(): Promise<void>;
}

async function startUpstream(host: string, body: string): Promise<Upstream> {
  const u: Upstream = { host, port: 0, hostPort: '', body, hits: 0, close: async () => undefined };
  const server: Server = createServer((req, res) => {
    u.hits++;
    req.resume();
    res.writeHead(200, { 'content-type': 'text/plain' });
    res.end(body);
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, host, () => resolve());
  });
  u.port = (server.address() as AddressInfo).port;
  u.hostPort = `${host}:${String(u.port)}`;
  u.close = () =>
    new Promise<void>((resolve) => {
      server.closeAllConnections();
      server.close(() => resolve());
    });
  return u;
}

/** Upstreams are the allowed and the denied upstream. */
export interface Upstreams {
  allowed: Upstream;
  denied: Upstream;
  close(): Promise<void>;
}

/** startUpstreams starts both upstreams on the host's loopback. */
export async function startUpstreams(): Promise<Upstreams> {
  const allowed = await startUpstream('127.0.0.2', 'hello from the allowlisted upstream');
  const denied = await startUpstream('127.0.0.3', 'the denied upstream must never answer a sandbox');
  return { allowed, denied, close: async () => void (await Promise.all([allowed.close(), denied.close()])) };
}

/** The sandbox override that turns the network on for the allowed upstream only. */
export function netOverride(u: Upstreams): { net: { enabled: boolean; allow: string[] } } {
  return { net: { enabled: true, allow: [u.allowed.hostPort] } };
}

/**
 * egressProbe is Python that, with the network on, fetches the allowed
 * upstream through the proxy the sandbox is given, the denied upstream and
 * the metadata address through it too, and the allowed upstream directly.
 */
export function egressProbe(u: Upstreams): string {
  // The image's python is python3-minimal (no http, no urllib.request), so
  // the probe speaks HTTP to the proxy itself, as a proxied client does.
  return `import errno, os, socket
proxy = os.environ.get("HTTP_PROXY") or os.environ.get("http_proxy") or ""
print("proxy", proxy or "none")
def get(url):
    if not proxy:
        return "error no-proxy"
    host, _, port = proxy.split("://", 1)[-1].rstrip("/").rpartition(":")
    try:
        s = socket.create_connection((host.strip("[]"), int(port)), timeout=5)
        try:
            s.sendall(("GET %s HTTP/1.1\\r\\nHost: %s\\r\\nConnection: close\\r\\n\\r\\n" % (url, url.split("/")[2])).encode())
            data = b""
            while True:
                chunk = s.recv(65536)
                if not chunk:
                    break
                data += chunk
        finally:
            s.close()
    except OSError as e:
        return "error " + errno.errorcode.get(e.errno, str(e))
    head, _, body = data.partition(b"\\r\\n\\r\\n")
    lines = head.decode(errors="replace").split("\\r\\n")
    headers = {l.split(":", 1)[0].strip().lower(): l.split(":", 1)[1].strip() for l in lines[1:] if ":" in l}
    if headers.get("transfer-encoding", "").lower() == "chunked":
        out = b""
        while body:
            size, _, rest = body.partition(b"\\r\\n")
            n = int(size.split(b";")[0] or b"0", 16)
            if n == 0:
                break
            out, body = out + rest[:n], rest[n + 2:]
        body = out
    status = (lines[0].split(" ") + ["?", "?"])[1]
    return "%s %s" % (status, body.decode(errors="replace")[:60] if status == "200" else headers.get("x-gatekeeper-rule", "-"))
print("allowed", get("http://${u.allowed.hostPort}/"))
print("denied", get("http://${u.denied.hostPort}/"))
print("metadata", get("http://169.254.169.254/latest/meta-data/"))
def connect(label, addr):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr)
        print(label, "connected")
    except socket.timeout:
        print(label, "timeout")
    except OSError as e:
        print(label, errno.errorcode.get(e.errno, str(e)))
    finally:
        s.close()
connect("direct", ("${u.allowed.host}", ${String(u.allowed.port)}))
if proxy:
    gw = proxy.split("://", 1)[-1].rpartition(":")[0].strip("[]")
    connect("gateway-ssh", (gw, 22))
try:
    socket.getaddrinfo("example.com", 443)
    print("dns resolved")
except socket.gaierror as e:
    print("dns", {socket.EAI_AGAIN: "EAI_AGAIN", socket.EAI_NONAME: "EAI_NONAME"}.get(e.errno, "gaierror %s" % e.errno))
`;
}

/** egressStep is the model's call of the probe. */
export function egressStep(u: Upstreams, say: string): Step {
  return {
    say,
    call: { name: RUN, input: { language: 'python', code: egressProbe(u) } },
    check: (o, t) => checkEgress(t, o, u),
  };
}

/**
 * checkEgress asserts the outcome of egressStep: either the run was refused
 * because the runner cannot enforce a network policy (and nothing ran), or
 * it ran and reached exactly the allowed upstream, through the proxy.
 */
export function checkEgress(t: Transcript, o: Outcome, u: Upstreams): void {
  const text = o.result?.text ?? '';
  if (o.sandbox === undefined && /runner_unavailable/.test(text)) {
    t.note('this runner cannot enforce a network policy (no egress proxy or host firewall): the run is refused, never run with an open network');
    if (process.env.CI === 'true') t.fail('the runner enforces network policies in CI (CI=true), so the proxy is tested', text);
    t.expect(o.decisions[0]?.decision === 'allow', 'the call itself was allowed by the policy', JSON.stringify(o.decisions));
    t.expect(
      o.result?.is_error === true && text.includes('network policy not supported'),
      'the run was refused with runner_unavailable: "network policy not supported"',
      text,
    );
    t.expect(o.run?.outcome === 'error' && (o.run.error ?? '').includes('network policy not supported'), 'the audit log records the refused run', JSON.stringify(o.run));
    t.expect(u.allowed.hits === 0 && u.denied.hits === 0, 'no upstream got a request', `allowed ${String(u.allowed.hits)}, denied ${String(u.denied.hits)}`);
    t.expect(o.run?.run_id !== undefined && containersOf(`gatekeeper.run_id=${o.run.run_id}`).length === 0, 'no container was made for it', JSON.stringify(o.run));
    return;
  }
  const r = o.sandbox;
  t.expect(r !== undefined, 'the network-enabled run ran', text);
  if (r === undefined) return;
  const lines = probeLines(r.stdout);
  t.expect((lines.get('proxy') ?? 'none') !== 'none', 'the sandbox was given an egress proxy', r.stdout);
  t.expect(lines.get('allowed') === `200 ${u.allowed.body}`, `the allowlisted upstream ${u.allowed.hostPort} answered through the proxy`, r.stdout);
  t.expect(lines.get('denied') === '403 egress.not_allowlisted', `the upstream ${u.denied.hostPort}, not allowlisted, was refused by the proxy: 403 egress.not_allowlisted`, r.stdout);
  t.expect(lines.get('metadata') === '403 egress.metadata', 'the cloud metadata address was refused by the proxy: 403 egress.metadata', r.stdout);
  t.expect(lines.get('direct') === 'ECONNREFUSED', 'the allowlisted upstream is unreachable without the proxy: ECONNREFUSED (the sandbox\'s 127/8 is its own)', r.stdout);
  t.expect(lines.get('gateway-ssh') !== undefined && lines.get('gateway-ssh') !== 'connected', `the host behind the proxy's address has no other open port (port 22: ${String(lines.get('gateway-ssh'))})`, r.stdout);
  t.expect(lines.get('dns') !== undefined && lines.get('dns') !== 'resolved', `a DNS lookup fails: the proxy resolves names, the sandbox cannot (${String(lines.get('dns'))})`, r.stdout);
  t.expect(u.denied.hits === 0, 'the denied upstream never got a request', String(u.denied.hits));
  t.expect(u.allowed.hits === 1, 'the allowed upstream got exactly the one proxied request', String(u.allowed.hits));
  const logged = o.egress.map((e) => `${String(e.decision)} ${String(e.host)}:${String(e.port)} ${String(e.rule)}`);
  t.expect(
    logged.length === 3 &&
      logged.includes(`allow ${u.allowed.hostPort} egress.allowlisted`) &&
      logged.includes(`deny ${u.denied.hostPort} egress.not_allowlisted`) &&
      logged.some((l) => /^deny 169\.254\.169\.254:80 egress\.metadata$/.test(l)),
    'the audit log has one egress line per request: the allow and both denies, with their rules',
    logged.join('\n'),
  );
  const id = o.run?.run_id ?? '?';
  t.expect(containersOf(`gatekeeper.run_id=${id}`).length === 0 && networksOf(`gatekeeper.run_id=${id}`).length === 0, 'the run\'s container and network are gone', id);
}
