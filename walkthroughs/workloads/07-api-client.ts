// Workload 7: an API client. The test serves a small JSON API on the
// host's loopback; the model's client (Python's urllib, as a model would
// write it) pages through its orders and posts a report, through
// gatekeeper's egress proxy, in a query whose override allowlists the
// server's literal address. The same program in a query without that
// allowlist entry fails, and the proxy's rule is in what the model reads.

import { createServer, type IncomingMessage } from 'node:http';
import type { AddressInfo } from 'node:net';
import { canonical, RUN, type Outcome } from '../lib/agent.js';
import { mulberry32, ranOk, type Workload } from './lib.js';

const TOKEN = 'wl7-test-token-5b1c';
const PAGES = 3;
const PER_PAGE = 10;

interface Seen {
  method: string;
  url: string;
  auth: string;
  body: string;
}

/** ApiServer is the loopback API, with the requests it got. */
interface ApiServer {
  hostPort: string;
  seen: Seen[];
  totalCents: number;
  close(): Promise<void>;
}

async function startApi(): Promise<ApiServer> {
  const rnd = mulberry32(77);
  const orders = Array.from({ length: PAGES * PER_PAGE }, (_, i) => ({ id: `o-${String(i + 1)}`, amount_cents: 100 + Math.floor(rnd() * 50000) }));
  const seen: Seen[] = [];
  const body = (req: IncomingMessage): Promise<string> =>
    new Promise((done) => {
      const chunks: Buffer[] = [];
      req.on('data', (c: Buffer) => chunks.push(c));
      req.on('end', () => done(Buffer.concat(chunks).toString('utf8')));
    });
  const server = createServer((req, res) => {
    void body(req).then((text) => {
      seen.push({ method: req.method ?? '', url: req.url ?? '', auth: req.headers.authorization ?? '', body: text });
      const reply = (status: number, v: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(v));
      };
      if (req.headers.authorization !== `Bearer ${TOKEN}`) return reply(401, { error: 'unauthorized' });
      const u = new URL(req.url ?? '/', 'http://api');
      if (req.method === 'GET' && u.pathname === '/v1/orders') {
        const page = Number(u.searchParams.get('page') ?? '1');
        return reply(200, { orders: orders.slice((page - 1) * PER_PAGE, page * PER_PAGE), next: page < PAGES ? page + 1 : null });
      }
      if (req.method === 'POST' && u.pathname === '/v1/reports') return reply(201, { id: 'rep-1' });
      return reply(404, { error: 'not found' });
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  return {
    hostPort: `127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    seen,
    totalCents: orders.reduce((s, o) => s + o.amount_cents, 0),
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

const client = (hostPort: string): string => `import json
import urllib.request

API = "http://${hostPort}"
TOKEN = "${TOKEN}"


def call(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(API + path, data=data, method=method, headers={"Authorization": f"Bearer {TOKEN}", "Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=10) as r:
        return r.status, json.load(r)


orders, page = [], 1
while page:
    _, data = call("GET", f"/v1/orders?page={page}")
    orders += data["orders"]
    page = data["next"]
total = sum(o["amount_cents"] for o in orders)
status, report = call("POST", "/v1/reports", {"count": len(orders), "total_cents": total})
print("orders", len(orders), "total_cents", total)
print("report", status, report["id"])
`;

/** egressLines renders a run's egress audit lines. */
const egressLines = (o: Outcome): string[] => o.egress.map((e) => `${String(e.decision)} ${String(e.host)}:${String(e.port)} ${String(e.rule)}`);

export const apiClient: Workload = {
  n: 7,
  name: 'API client via egress proxy',
  about: [
    'A JSON API on the host\'s loopback; the model\'s urllib client pages through it and posts a report through the',
    'egress proxy, in a query whose override allowlists the server\'s literal address; the same program in a query',
    'without it is refused by the proxy, with the rule in what the model reads (python).',
  ],
  async run(c) {
    const api = await startApi();
    try {
      c.t.line('api', `http://${api.hostPort}: ${String(PAGES)} pages of ${String(PER_PAGE)} orders, total ${String(api.totalCents)} cents`);
      const w = await c.world({ policy: { netEnabled: true, netAllow: [], netHosts: [api.hostPort] } });
      const code = client(api.hostPort);
      const calls = PAGES + 1;
      await c.agent(w, [
        {
          say: `the model's client pages through the API and posts a report (net.allow: ${api.hostPort}, by this query's override)`,
          call: { name: RUN, input: { language: 'python', code } },
          check: (o, t) => {
            const r = ranOk(t, o);
            t.expect(r?.stdout === `orders ${String(PAGES * PER_PAGE)} total_cents ${String(api.totalCents)}\nreport 201 rep-1\n`, `it read ${String(PAGES * PER_PAGE)} orders totalling ${String(api.totalCents)} cents and the report was created`, JSON.stringify(r?.stdout));
            const got = api.seen.map((s) => `${s.method} ${s.url}`);
            const want = [...Array.from({ length: PAGES }, (_, i) => `GET /v1/orders?page=${String(i + 1)}`), 'POST /v1/reports'];
            t.expect(JSON.stringify(got) === JSON.stringify(want), `the server got exactly ${String(calls)} requests: ${want.join(', ')}`, JSON.stringify(got));
            t.expect(api.seen.every((s) => s.auth === `Bearer ${TOKEN}`), 'each carried the bearer token');
            let posted: unknown = api.seen.at(-1)?.body;
            try {
              posted = JSON.parse(String(posted));
            } catch {
              // shown as it is
            }
            t.expect(canonical(posted) === canonical({ count: PAGES * PER_PAGE, total_cents: api.totalCents }), 'the posted report has the count and the total', api.seen.at(-1)?.body);
            const lines = egressLines(o);
            t.expect(lines.length === calls && lines.every((l) => l === `allow ${api.hostPort} egress.allowlisted`), `the audit log has ${String(calls)} egress lines: allow ${api.hostPort} egress.allowlisted`, lines.join('\n'));
          },
        },
      ], { tag: 'w7a', prompt: 'Total the orders of the API and post a report.', sandboxPolicy: { net: { enabled: true, allow: [api.hostPort] } } });
      const before = api.seen.length;
      await c.agent(w, [
        {
          say: 'the same program in a query without the allowlist entry',
          call: { name: RUN, input: { language: 'python', code } },
          check: (o, t) => {
            const r = o.sandbox;
            t.expect(r !== undefined && r.exit_code !== 0, 'the program failed', JSON.stringify(r));
            // The program does not catch the error: the model reads urllib's
            // own message, made of the proxy's status line.
            const last = (r?.stderr ?? '').trimEnd().split('\n').at(-1) ?? '';
            t.line('model ←', last);
            t.expect(
              /^urllib\.error\.HTTPError: HTTP Error 403: gatekeeper egress denied: .*\(rule egress\.not_allowlisted\)$/.test(last),
              'urllib\'s error, the last line the model reads, names the proxy\'s rule: egress.not_allowlisted',
              r?.stderr.slice(-800),
            );
            t.expect(api.seen.length === before, 'the server got no request', String(api.seen.length - before));
            const lines = egressLines(o);
            t.expect(lines.length === 1 && lines[0] === `deny ${api.hostPort} egress.not_allowlisted`, `the audit log has the proxy's refusal: deny ${api.hostPort} egress.not_allowlisted`, lines.join('\n'));
          },
        },
      ], { tag: 'w7b', prompt: 'Total the orders of the API and post a report.' });
      return `${String(PAGES * PER_PAGE)} orders, ${String(api.totalCents)} cents, ${String(calls)} proxied calls; without the allowlist: egress.not_allowlisted`;
    } finally {
      await api.close();
    }
  },
};
