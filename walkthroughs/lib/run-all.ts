// Runs the eleven walkthroughs in order, each in its own process, and fails
// when any of them fails. `npm run all`.

import { spawnSync } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { bold, green, red } from './transcript.js';

const build = join(dirname(fileURLToPath(import.meta.url)), '..');
const scripts = readdirSync(build).filter((f) => /^\d\d-.*\.js$/.test(f)).sort();
const results: { name: string; ok: boolean; secs: number }[] = [];
const started = Date.now();
for (const s of scripts) {
  const t0 = Date.now();
  const r = spawnSync(process.execPath, [join(build, s)], { stdio: 'inherit' });
  results.push({ name: s.replace(/\.js$/, ''), ok: r.status === 0, secs: (Date.now() - t0) / 1000 });
}
console.log('');
console.log(bold('━━ Walkthroughs ' + '━'.repeat(62)));
for (const r of results) console.log(`   ${r.ok ? green('✔') : red('✘')} ${r.name.padEnd(26)} ${r.secs.toFixed(1).padStart(5)} s`);
const failed = results.filter((r) => !r.ok);
const total = ((Date.now() - started) / 1000).toFixed(1);
if (scripts.length !== 11) {
  console.log(red(`expected 11 walkthroughs in ${build}, found ${String(scripts.length)}`));
  process.exit(1);
}
console.log(failed.length === 0 ? green(bold(`all ${String(results.length)} walkthroughs passed (${total} s)`)) : red(bold(`${String(failed.length)} of ${String(results.length)} walkthroughs failed (${total} s)`)));
process.exit(failed.length === 0 ? 0 : 1);
