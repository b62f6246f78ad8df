// Workload 9: two services in one sandbox. A Node.js key-value server and
// a Python client run side by side in one run and talk over the sandbox's
// own loopback (its network is off: lo is all it has); the server writes
// its statistics when told to stop, and they come back as a file.

import { canonical, RUN } from '../lib/agent.js';
import { fileText, ranOk, type Workload } from './lib.js';

const KEYS = 50;
const PORT = 8765;

const SERVER = `const http = require("http");
const fs = require("fs");
const store = new Map();
const stats = { pid: process.pid, puts: 0, gets: 0, misses: 0 };
const server = http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const m = /^\\/kv\\/([\\w-]+)$/.exec(req.url);
    if (req.method === "PUT" && m) {
      store.set(m[1], Buffer.concat(chunks).toString());
      stats.puts++;
      res.writeHead(204);
      return res.end();
    }
    if (req.method === "GET" && m) {
      stats.gets++;
      if (!store.has(m[1])) {
        stats.misses++;
        res.writeHead(404);
        return res.end();
      }
      res.writeHead(200, { "content-type": "text/plain" });
      return res.end(store.get(m[1]));
    }
    if (req.method === "POST" && req.url === "/shutdown") {
      fs.writeFileSync("server-stats.json", JSON.stringify({ ...stats, keys: store.size }));
      res.end("bye");
      return server.close();
    }
    res.writeHead(404);
    res.end();
  });
});
server.listen(${String(PORT)}, "127.0.0.1", () => console.log("server", process.pid, "listening"));
`;

const CLIENT = `import os
import time
import urllib.error
import urllib.request

BASE = "http://127.0.0.1:${String(PORT)}"
for _ in range(200):
    try:
        urllib.request.urlopen(BASE + "/kv/ping", timeout=1)
    except urllib.error.HTTPError as e:
        if e.code == 404:
            break  # the server is up: it answers a key it does not have
    except OSError:
        time.sleep(0.05)
else:
    raise SystemExit("the server never answered")
for i in range(1, ${String(KEYS)} + 1):
    urllib.request.urlopen(urllib.request.Request(f"{BASE}/kv/k{i}", data=str(i * i).encode(), method="PUT")).close()
total = sum(int(urllib.request.urlopen(f"{BASE}/kv/k{i}").read()) for i in range(1, ${String(KEYS)} + 1))
print("client", os.getpid(), "sum", total)
print(urllib.request.urlopen(urllib.request.Request(BASE + "/shutdown", data=b"", method="POST")).read().decode())
`;

export const multiService: Workload = {
  n: 9,
  name: 'multi-service (server + client)',
  about: [
    `A Node.js key-value server and a Python client in one run, over the sandbox's own loopback (127.0.0.1:${String(PORT)};`,
    'the network is off): the client stores and reads back squares, the server reports its counts in a file (node).',
  ],
  async run(c) {
    let sum = 0;
    for (let i = 1; i <= KEYS; i++) sum += i * i;
    const w = await c.world({ policy: { image: 'node', timeout: '30s' } });
    let summary = '';
    await c.agent(w, [
      {
        say: 'the model starts the server in the background and runs the client against it',
        call: {
          name: RUN,
          input: {
            language: 'sh',
            code: 'node server.js & srv=$!\npython3 client.py\nwait $srv\necho "server exit $?"',
            files: { 'server.js': SERVER, 'client.py': CLIENT },
          },
        },
        check: (o, t) => {
          const r = ranOk(t, o);
          const out = r?.stdout ?? '';
          const server = /^server (\d+) listening$/m.exec(out)?.[1];
          const client = new RegExp(`^client (\\d+) sum ${String(sum)}$`, 'm').exec(out)?.[1];
          t.expect(server !== undefined, 'the server listened', out);
          t.expect(client !== undefined, `the client stored ${String(KEYS)} squares and read back their sum, ${String(sum)}`, out);
          t.expect(server !== client, `two processes: server pid ${String(server)}, client pid ${String(client)}`);
          t.expect(/^bye$/m.test(out) && out.endsWith('server exit 0\n'), 'the client stopped the server, which exited 0', out);
          const stats = fileText(r, 'server-stats.json');
          const want = { gets: KEYS + 1, keys: KEYS, misses: 1, pid: Number(server), puts: KEYS };
          let got: unknown = stats;
          try {
            got = JSON.parse(stats ?? '');
          } catch {
            // shown as text
          }
          t.expect(canonical(got) === canonical(want), `server-stats.json came back: ${String(KEYS)} puts, ${String(KEYS + 1)} gets (one miss: the readiness probe), ${String(KEYS)} keys, the server's pid`, `got ${String(stats)}\nwant ${JSON.stringify(want)}`);
          summary = `sum ${String(sum)} over ${String(KEYS)} keys; server ${String(KEYS)} puts / ${String(KEYS + 1)} gets`;
        },
      },
    ], { tag: 'w9', prompt: 'Run the key-value server and its client together.', timeoutMs: 180_000 });
    return summary;
  },
};
