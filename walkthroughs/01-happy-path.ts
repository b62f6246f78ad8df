// Walkthrough 1: the happy path. The model runs Python in gatekeeper's
// sandbox and gets `hello` back; then it passes a CSV in as a file and gets
// a computed sum.

import { expectRan, runAgent, RUN } from './lib/agent.js';
import { Transcript } from './lib/transcript.js';
import { RUNNER, startWorld } from './lib/world.js';

const t = new Transcript(1, 'Happy path');
t.header(
  'A real Agent SDK query through @gatekeeper/client; the scripted model runs Python through',
  `${RUN}; the real sidecar decides each call with Rego and runs the code in ${RUNNER === 'kube' ? 'a Kubernetes Pod' : 'Docker'}.`,
);
const w = await startWorld({ n: 1 });
try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}) on ${w.url}, the shipped policy, instance ${w.instance}`);
  const csv = 'region,amount\nnorth,120.50\nsouth,99.25\neast,1000\nwest,14.75\n';
  await runAgent(w, t, [
    {
      say: 'the model runs a Python hello world in the sandbox',
      call: { name: RUN, input: { language: 'python', code: 'print("hello")' } },
      check: (o, t) => {
        const r = expectRan(t, o);
        t.expect(r?.stdout === 'hello\n', 'stdout is "hello"', JSON.stringify(r));
        t.expect(r?.exit_code === 0 && r.reason === 'exited', 'the program exited with code 0');
        t.expect(r?.timed_out === false && r.oom_killed === false && r.truncated === false, 'no limit was hit');
        t.expect(o.run?.runtime === 'runc', 'it ran under runc, the policy\'s runtime', String(o.run?.runtime));
      },
    },
    {
      say: 'the model passes a CSV in as a file and sums a column with Python',
      call: {
        name: RUN,
        input: {
          language: 'python',
          code: 'import csv\nrows = list(csv.DictReader(open("data/sales.csv")))\nprint(f"rows {len(rows)}")\nprint(f"sum {sum(float(r[\'amount\']) for r in rows):.2f}")',
          files: { 'data/sales.csv': csv },
        },
      },
      check: (o, t) => {
        const r = expectRan(t, o);
        t.expect(r?.stdout === 'rows 4\nsum 1234.50\n', 'the sandbox read the file and computed sum 1234.50', JSON.stringify(r));
        t.expect(r?.exit_code === 0, 'the program exited with code 0');
      },
    },
  ], {
    tag: '1',
    prompt: 'Say hello from Python, then sum the amount column of a CSV.',
    finalText: (os) => `Python said ${JSON.stringify(os[0]?.sandbox?.stdout.trim())}; the amounts add up to ${os[1]?.sandbox?.stdout.match(/sum (\S+)/)?.[1] ?? '?'}.`,
  });
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
}
process.exit(t.finish());
