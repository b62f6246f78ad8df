// Walkthrough 6: resource abuse. The model's code forks without end,
// allocates without end, spins past its timeout, floods its output and fills
// /tmp. Each is contained by a limit of the policy and reported with its
// flag; meanwhile a second connection keeps getting decisions from the
// sidecar, and afterwards no container of this sidecar is left.

import { join } from 'node:path';
import { writeFileSync } from 'node:fs';
import { expectRan, runAgent, RUN, type Outcome, type Step } from './lib/agent.js';
import { startDecisionProbe, type DecisionProbe } from './lib/probe.js';
import { Transcript } from './lib/transcript.js';
import { containersOf, networksOf, RUNNER, startWorld } from './lib/world.js';

const t = new Transcript(6, 'Resource abuse');
t.header(
  'Limits from the policy: pids 64, memory 128m, timeout 10s, output 16k per stream, /tmp 16m. A second',
  'WebSocket connection asks the sidecar for a decision every 25 ms throughout.',
);
const OUTPUT_CAP = 16 * 1024;
const w = await startWorld({
  n: 6,
  policy: { pids: 64, memory: '128m', timeout: '10s', outputMaxBytes: '16k', tmpSize: '16m' },
  prepare: (d) => writeFileSync(join(d.ws, 'notes.txt'), 'notes\n'),
});
let probe: DecisionProbe | undefined;
/** How often the second connection asks for a decision, in ms. */
const PROBE_EVERY = 25;

/**
 * meanwhile reports what the second connection saw while the step's run was
 * running: the decides in flight at some moment between the run's start and
 * end, as the sidecar's run record dates them, widened by one probe period:
 * a run shorter than that (a warm /tmp fill takes a few ms on a fast
 * machine) can fall between two decides.
 */
const meanwhile = (t: Transcript, o: Outcome, what: string): void => {
  if (probe === undefined) return;
  const { samples, unanswered } = probe.window();
  const end = Date.parse(o.run?.time ?? '');
  const start = end - (o.run?.duration_ms ?? 0);
  const during = samples.filter((s) => s.sentAt <= end + PROBE_EVERY && s.sentAt + s.ms >= start - PROBE_EVERY);
  const worst = Math.max(0, ...samples.map((s) => s.ms));
  const right = samples.filter((s) => s.decision === 'allow' && s.rule === 'host_fs.inside_workspace').length;
  t.line('2nd conn', `${String(during.length)} decisions while the ${what} ran (${String(samples.length)} during the step), all allow host_fs.inside_workspace: ${String(right === samples.length)}, unanswered ${String(unanswered)}, slowest ${String(worst)} ms`);
  t.expect(during.length >= 1 && right === samples.length && unanswered === 0, `the sidecar kept deciding while the ${what} ran`, JSON.stringify({ start, end, samples: samples.slice(0, 5) }));
};

const abuse = (say: string, code: string, what: string, check: Step['check'], extra: Record<string, unknown> = {}): Step => ({
  say,
  call: { name: RUN, input: { language: 'python', code, ...extra } },
  before: () => void probe?.window(),
  check: async (o, t) => {
    await check?.(o, t);
    meanwhile(t, o, what);
  },
});

try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}), instance ${w.instance}`);
  probe = await startDecisionProbe(w.socketPath, w.tokenFile, { tool_name: 'Read', tool_input: { file_path: join(w.dirs.ws, 'notes.txt') } }, PROBE_EVERY);
  t.line('2nd conn', `connected: hello, open_query, then decide Read notes.txt every ${String(PROBE_EVERY)} ms`);
  await runAgent(w, t, [
    abuse('a fork bomb: fork until it fails, then keep forking for 2 s', `import os, time, errno
n = 0
try:
    while n < 10000:
        if os.fork() == 0:
            time.sleep(30)
            os._exit(0)
        n += 1
    print("forked", n, "children without a limit")
except OSError as e:
    print("fork failed with", errno.errorcode[e.errno], "after", n, "children")
failed, until = 0, time.time() + 2
while time.time() < until:
    try:
        if os.fork() == 0:
            os._exit(0)
    except OSError:
        failed += 1
print("kept trying:", failed, "more forks failed")
`, 'fork bomb', (o, t) => {
      const r = expectRan(t, o);
      const m = /^fork failed with (\w+) after (\d+) children$/m.exec(r?.stdout ?? '');
      t.expect(m?.[1] === 'EAGAIN', 'fork failed with EAGAIN: the pids limit held', r?.stdout);
      t.expect(Number(m?.[2] ?? 9999) < 64, `fewer than 64 children (${String(m?.[2])})`);
      t.expect(r?.exit_code === 0 && r.timed_out === false, 'the program went on and exited 0 once fork failed');
    }),
    abuse('a memory bomb: allocate 1 MiB after 1 MiB', `chunks = []
while True:
    chunks.append(bytearray(1 << 20))
    chunks[-1][::4096] = b"x" * 256
`, 'memory bomb', (o, t) => {
      const r = expectRan(t, o);
      t.expect(r?.oom_killed === true && r.reason === 'oom_killed', 'the memory limit killed it: oom_killed', JSON.stringify(r));
      t.expect(r?.exit_code === 137, 'exit code 137 (SIGKILL)', String(r?.exit_code));
    }),
    // It would stop by itself after 6 s of its own clock, before the
    // policy's 10 s: only the call's timeout_s 3, which starts before the
    // program does, can end it as timed out.
    abuse('a CPU spin with timeout_s 3, which would stop by itself after 6 s', `import time
start = time.monotonic()
while time.monotonic() - start < 6:
    pass
print("spun for 6 s and stopped by itself")
`, 'CPU spin', (o, t) => {
      const r = expectRan(t, o);
      t.expect(r?.timed_out === true && r.reason === 'timed_out', "the call's timeout_s 3 killed it: timed_out, before it could stop by itself", JSON.stringify(r));
    }, { timeout_s: 3 }),
    abuse('an output flood: 64 MiB to stdout', `import sys
chunk = b"x" * 65536
for _ in range(1024):
    sys.stdout.buffer.write(chunk)
print("flood done", file=sys.stderr)
`, 'output flood', (o, t) => {
      const r = expectRan(t, o);
      t.expect(r?.truncated === true, 'the output was cut: truncated', JSON.stringify({ ...r, stdout: `${String(r?.stdout.length)} bytes` }));
      t.expect(r?.stdout.length === OUTPUT_CAP, `exactly ${String(OUTPUT_CAP)} bytes of stdout came back (${String(r?.stdout.length)})`);
      t.expect(r?.stderr === 'flood done\n' && r.exit_code === 0, 'the program ran to its end and exited 0', JSON.stringify(r?.stderr));
    }),
    abuse('fill /tmp', `import errno
n = 0
try:
    with open("/tmp/fill", "wb") as f:
        while True:
            f.write(b"\\0" * (1 << 20))
            f.flush()
            n += 1
except OSError as e:
    print("write failed with", errno.errorcode[e.errno], "after", n, "MiB")
`, '/tmp fill', (o, t) => {
      const r = expectRan(t, o);
      const m = /^write failed with (\w+) after (\d+) MiB$/.exec((r?.stdout ?? '').trim());
      t.expect(m?.[1] === 'ENOSPC', 'the write failed with ENOSPC', r?.stdout);
      t.expect(Number(m?.[2] ?? 0) >= 14 && Number(m?.[2] ?? 99) <= 16, `at the 16 MiB size of /tmp (${String(m?.[2])} MiB)`);
    }),
  ], { tag: 'abuse', prompt: 'Stress the machine.', finalText: () => 'Every attempt was contained.' });

  t.section('Afterwards');
  const all = probe.all;
  await probe.stop();
  probe = undefined;
  t.line('2nd conn', `${String(all.length)} decisions in all, slowest ${String(Math.max(0, ...all.map((s) => s.ms)))} ms`);
  const label = `gatekeeper.instance=${w.instance}`;
  const warm = containersOf(`gatekeeper.pool`).filter((id) => containersOf(label).includes(id));
  const [sandboxes, nets_] = RUNNER === 'kube' ? ['Pods', 'NetworkPolicies'] : ['containers', 'networks'];
  t.line(RUNNER, `${String(warm.length)} warm ${sandboxes} of the sidecar's pool wait for the next run (label gatekeeper.pool)`);
  await w.stop();
  t.line('sidecar', 'stopped (SIGTERM)');
  const left = containersOf(label);
  const nets = networksOf(label);
  t.line(RUNNER, `${sandboxes} labelled ${label}: ${left.length === 0 ? 'none' : left.join(' ')}; ${nets_}: ${nets.length === 0 ? 'none' : nets.join(' ')}`);
  t.expect(left.length === 0 && nets.length === 0, `no ${sandboxes === 'Pods' ? 'Pod or NetworkPolicy' : 'container or network'} of this sidecar is left`);
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await probe?.stop();
  await w.stop();
}
process.exit(t.finish());
