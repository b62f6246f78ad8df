// Runs the seed workloads (issue 11, section 5) one after another and
// prints a table: project, result, duration, runs and the sandbox's time in
// them, peak memory. Exits non-zero when any expectation of any workload
// broke. `npm run workloads` (all), `npm run workloads -- 3 csv` (those
// whose number or name is given).

import { Transcript, bold, green, red } from '../lib/transcript.js';
import { Ctx, mib, type Workload } from './lib.js';
import { hello } from './01-hello.js';
import { calculator } from './02-calculator.js';
import { csv } from './03-csv.js';
import { docgen } from './04-docgen.js';
import { site } from './05-site.js';
import { logs } from './06-logs.js';
import { apiClient } from './07-api-client.js';
import { packageBuilder } from './08-package.js';
import { multiService } from './09-multi-service.js';
import { escapes } from './10-escapes.js';

const all: Workload[] = [hello, calculator, csv, docgen, site, logs, apiClient, packageBuilder, multiService, escapes];

interface Row {
  w: Workload;
  ok: boolean;
  result: string;
  secs: number;
  runs: number;
  sandboxMs: number;
  peakBytes: number;
}

const wanted = process.argv.slice(2);
const chosen = wanted.length === 0 ? all : all.filter((w) => wanted.includes(String(w.n)) || wanted.includes(w.name));
if (chosen.length === 0) {
  console.error(`no workload matches ${wanted.join(' ')}; there are: ${all.map((w) => `${String(w.n)} ${w.name}`).join(', ')}`);
  process.exit(2);
}

const rows: Row[] = [];
const started = Date.now();
for (const w of chosen) {
  const t = new Transcript(w.n, w.name, 'Workload');
  t.header(...w.about);
  const c = new Ctx(t, w.n);
  const t0 = Date.now();
  let result = '';
  try {
    result = await w.run(c);
  } catch (err) {
    t.fail('the workload ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
  } finally {
    await c.close();
  }
  const secs = (Date.now() - t0) / 1000;
  const ok = t.finish() === 0;
  rows.push({
    w,
    ok,
    result: ok ? result : `${String(t.failures)} expectation(s) broke, first: ${t.brokenExpectations[0] ?? '?'}`,
    secs,
    runs: c.runs.length,
    sandboxMs: c.runs.reduce((s, r) => s + r.durationMs, 0),
    peakBytes: Math.max(0, ...c.runs.map((r) => r.peakBytes)),
  });
}

const head = ['#', 'project', 'result', 'duration', 'runs (sandbox time)', 'peak memory'];
const cells = rows.map((r) => [
  String(r.w.n),
  r.w.name,
  `${r.ok ? '✔' : '✘'} ${r.result}`,
  `${r.secs.toFixed(1)} s`,
  `${String(r.runs)} (${(r.sandboxMs / 1000).toFixed(1)} s)`,
  r.peakBytes > 0 ? mib(r.peakBytes) : '-',
]);
const width = head.map((h, i) => Math.max(h.length, ...cells.map((c) => (c[i] ?? '').length)));
const line = (c: string[]): string => `| ${c.map((x, i) => (i === 3 || i === 5 ? x.padStart(width[i] ?? 0) : x.padEnd(width[i] ?? 0))).join(' | ')} |`;
console.log('');
console.log(bold(`━━ Workloads ${'━'.repeat(66)}`));
console.log(line(head));
console.log(`|${width.map((n, i) => (i === 3 || i === 5 ? `${'-'.repeat(n + 1)}:` : '-'.repeat(n + 2))).join('|')}|`);
for (const [i, c] of cells.entries()) {
  const text = line(c);
  console.log(rows[i]?.ok === true ? text : red(text));
}
const failed = rows.filter((r) => !r.ok);
const total = ((Date.now() - started) / 1000).toFixed(1);
console.log(
  failed.length === 0
    ? green(bold(`all ${String(rows.length)} workloads passed (${total} s)`))
    : red(bold(`${String(failed.length)} of ${String(rows.length)} workloads failed (${total} s): ${failed.map((r) => r.w.name).join(', ')}`)),
);
process.exit(failed.length === 0 ? 0 : 1);
