// Workload 6: a log analyzer over a 100 MiB access log, within a 64 MiB
// memory limit.
//
// The log is generated here, on the host, from a fixed seed, and mounted
// read-only at /deps (sandbox.fs.deps) rather than generated in the
// sandbox:
// - the expected counts are then computed by this generator, independently
//   of the Python that analyzes the log; generating it in the sandbox would
//   leave the expectation to the same program under test, or to a second
//   copy of the generator in another language;
// - it is how an operator hands a model a large read-only dataset: /deps is
//   a bind mount, nothing is copied, and 100 MiB could not travel as run
//   files anyway (sandbox.output.max_files_bytes is at most 64m);
// - /workspace and /tmp are tmpfs, whose pages count against the
//   container's memory limit: a 100 MiB log there would not fit in 64 MiB.
// The limit means the analyzer has to stream: the log does not fit in it.

import { closeSync, mkdirSync, openSync, writeSync } from 'node:fs';
import { join } from 'node:path';
import { canonical, RUN } from '../lib/agent.js';
import { fileText, mib, mulberry32, pick, ranOk, type Workload } from './lib.js';

const TARGET_BYTES = 100 * 1024 * 1024;
const MEMORY = '64m';
const MEMORY_BYTES = 64 << 20;

interface Counts {
  lines: number;
  bytes: number;
  levels: Record<string, number>;
  statuses: Record<string, number>;
  endpoints: Record<string, number>;
  errors_by_hour: Record<string, number>;
  slow: number;
  unique_ips: number;
  response_bytes: number;
}

const STATUSES: [string, number][] = [['200', 70], ['201', 6], ['304', 8], ['400', 3], ['404', 8], ['429', 1], ['500', 3], ['503', 1]];
const ENDPOINTS = ['/api/items', '/api/orders', '/api/users', '/health', '/static/app.js'] as const;
const METHODS = ['GET', 'GET', 'GET', 'POST', 'PUT', 'DELETE'] as const;


/** writeLog writes the log to file and returns the counts an analyzer must find. */
function writeLog(file: string, seed: number): Counts {
  const rnd = mulberry32(seed);
  const weights = STATUSES.reduce((s, [, w]) => s + w, 0);
  const status = (): string => {
    let x = rnd() * weights;
    for (const [s, w] of STATUSES) if ((x -= w) < 0) return s;
    return '200';
  };
  const levels = new Map<string, number>();
  const statuses = new Map<string, number>();
  const endpoints = new Map<string, number>();
  const errorsByHour = new Map<string, number>();
  const ips = new Set<string>();
  const add = (m: Map<string, number>, k: string): void => void m.set(k, (m.get(k) ?? 0) + 1);
  let lines = 0;
  let bytes = 0;
  let slow = 0;
  let responseBytes = 0;
  const fd = openSync(file, 'w');
  try {
    const chunk: string[] = [];
    let chunkLen = 0;
    const base = Date.UTC(2024, 4, 1);
    let d = '';
    while (bytes < TARGET_BYTES) {
      if (lines % 20 === 0) d = new Date(base + lines * 50).toISOString().slice(0, 19); // 20 lines a second
      const st = status();
      const level = st.startsWith('5') ? 'ERROR' : st.startsWith('4') ? 'WARN' : 'INFO';
      const ip = `10.0.${String(Math.floor(rnd() * 4))}.${String(1 + Math.floor(rnd() * 250))}`;
      const ep = pick(rnd, ENDPOINTS);
      const path = ep.startsWith('/api/') ? `${ep}/${String(Math.floor(rnd() * 5000))}` : ep;
      const size = Math.floor(rnd() * 20000);
      const ms = Math.floor(rnd() ** 4 * 3000);
      const line = `${d}Z ${level} ${ip} "${pick(rnd, METHODS)} ${path} HTTP/1.1" ${st} ${String(size)} ${String(ms)}ms\n`;
      chunk.push(line);
      chunkLen += line.length;
      bytes += line.length;
      lines++;
      add(levels, level);
      add(statuses, st);
      add(endpoints, ep);
      if (level === 'ERROR') add(errorsByHour, d.slice(0, 13));
      ips.add(ip);
      if (ms >= 1000) slow++;
      responseBytes += size;
      if (chunkLen >= 1 << 20) {
        writeSync(fd, chunk.join(''));
        chunk.length = 0;
        chunkLen = 0;
      }
    }
    writeSync(fd, chunk.join(''));
  } finally {
    closeSync(fd);
  }
  return { lines, bytes, levels: Object.fromEntries(levels), statuses: Object.fromEntries(statuses), endpoints: Object.fromEntries(endpoints), errors_by_hour: Object.fromEntries(errorsByHour), slow, unique_ips: ips.size, response_bytes: responseBytes };
}

const ANALYZER = `"""Stream /deps/access.log once and count what an on-call engineer asks first."""
import collections
import json
import os
import resource

levels, statuses, endpoints, errors_by_hour = (collections.Counter() for _ in range(4))
ips = set()
lines = slow = response_bytes = 0
with open("/deps/access.log", "rb") as f:
    for raw in f:
        ts, level, ip, _method, path, _proto, status, size, ms = raw.split()
        lines += 1
        levels[level] += 1
        statuses[status] += 1
        endpoints[b"/".join(path.split(b"/")[:3])] += 1
        if level == b"ERROR":
            errors_by_hour[ts[:13]] += 1
        ips.add(ip)
        if int(ms[:-2]) >= 1000:
            slow += 1
        response_bytes += int(size)
text = lambda c: {k.decode(): v for k, v in c.items()}
report = {
    "lines": lines, "bytes": os.path.getsize("/deps/access.log"), "levels": text(levels), "statuses": text(statuses),
    "endpoints": text(endpoints), "errors_by_hour": text(errors_by_hour), "slow": slow, "unique_ips": len(ips),
    "response_bytes": response_bytes,
}
with open("report.json", "w") as f:
    json.dump(report, f, sort_keys=True, indent=1)
print("lines", lines, "errors", levels[b"ERROR"], "slow", slow)
print("maxrss_kib", resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
`;

export const logs: Workload = {
  n: 6,
  name: 'log analyzer (100 MiB)',
  about: [
    `A 100 MiB access log, generated on the host from a seed and mounted read-only at /deps, is analyzed by a`,
    `streaming Python program under a ${MEMORY} memory limit; its report.json must equal the counts the generator kept.`,
  ],
  async run(c) {
    let counts: Counts | undefined;
    const t0 = Date.now();
    const w = await c.world({
      policy: { memory: MEMORY, timeout: '120s' },
      prepare: (d) => {
        const deps = join(d.root, 'deps');
        mkdirSync(deps, { mode: 0o755 });
        counts = writeLog(join(deps, 'access.log'), 424242);
        return { deps };
      },
    });
    if (counts === undefined) throw new Error('the log was not written');
    const want = counts;
    c.t.line('log', `${String(want.lines)} lines, ${mib(want.bytes)}, written in ${((Date.now() - t0) / 1000).toFixed(1)} s (with the sidecar's start); errors ${String(want.levels.ERROR)}, slow ${String(want.slow)}`);
    let summary = '';
    await c.agent(w, [
      {
        say: 'the model streams the log in /deps and writes report.json',
        call: { name: RUN, input: { language: 'python', code: ANALYZER, timeout_s: 120 } },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect(r?.oom_killed === false, `it stayed within the ${MEMORY} memory limit (not OOM-killed)`, JSON.stringify(r));
          const rss = Number(/^maxrss_kib (\d+)$/m.exec(r?.stdout ?? '')?.[1] ?? NaN) * 1024;
          t.expect(rss > 0 && rss < MEMORY_BYTES, `the analyzer's own peak RSS, ${mib(rss)}, is below ${MEMORY}: it streamed a log bigger than its memory`, r?.stdout);
          t.expect((r?.stdout ?? '').startsWith(`lines ${String(want.lines)} errors ${String(want.levels.ERROR)} slow ${String(want.slow)}\n`), `lines ${String(want.lines)}, errors ${String(want.levels.ERROR)}, slow ${String(want.slow)}`, r?.stdout);
          const text = fileText(r, 'report.json');
          let got: unknown;
          try {
            got = JSON.parse(text ?? '');
          } catch {
            got = text;
          }
          t.expect(
            canonical(got) === canonical(want),
            'report.json came back and equals the generator\'s counts: levels, statuses, endpoints, errors per hour, slow requests, unique IPs, bytes',
            `got:  ${JSON.stringify(got)}\nwant: ${JSON.stringify(want)}`,
          );
          summary = `${String(want.lines)} lines: ${String(want.levels.ERROR)} errors, ${String(want.slow)} slow, ${String(want.unique_ips)} IPs`;
        },
      },
    ], { tag: 'w6', prompt: 'Analyze the access log in /deps.', timeoutMs: 240_000 });
    return summary;
  },
};
