// Walkthrough 2: per-query policy overrides. The same slow script times out
// under the operator's base policy (timeout 2 s) and finishes under a query
// whose sandboxPolicy raises the timeout; a query turning the network on
// for one allowlisted host; and an override beyond the operator's ceilings,
// refused before anything reaches the model.

import { GatekeeperError, query } from '@gatekeeper/client';
import { startFakeModel } from '@gatekeeper/client/testing';
import { expectRan, runAgent, RUN, type Step } from './lib/agent.js';
import { egressStep, netOverride, startUpstreams } from './lib/egress.js';
import { Transcript } from './lib/transcript.js';
import { readAudit, startWorld } from './lib/world.js';

const t = new Transcript(2, 'Policy override');
t.header(
  'The operator\'s base policy gives a run 2 s; a query may ask for more with sandboxPolicy, up to the',
  'operator\'s ceilings (timeout 120 s, network only to the hosts in ceilings.net_hosts).',
);
const up = await startUpstreams();
const w = await startWorld({ n: 2, policy: { timeout: '2s', netHosts: [up.allowed.hostPort] } });
const slow = (tag: string): Step => ({
  say: 'the model runs a script that works for about 3 s',
  call: { name: RUN, input: { language: 'python', code: `import time\nstart = time.time()\ntime.sleep(3)\nprint("finished after %.0f s" % (time.time() - start))  # ${tag}` } },
});
const opened = (): string => {
  const q = readAudit(w.auditLog).filter((r) => r.kind === 'query').at(-1);
  return q === undefined ? '(no query record)' : `query ${String(q.query_id)} opened, override ${JSON.stringify(q.tool_input ?? null)}, effective policy ${String(q.policy_hash).slice(0, 19)}…`;
};
try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}) on ${w.url}; base sandbox.proc.timeout 2s; ceilings.timeout 120s, ceilings.net_hosts [${up.allowed.hostPort}]`);

  t.section('Query A: the base policy (timeout 2 s)');
  await runAgent(w, t, [{
    ...slow('A'),
    check: (o, t) => {
      t.line('audit', opened());
      const r = expectRan(t, o);
      t.expect(r?.timed_out === true && r.reason === 'timed_out', 'the run was killed at the 2 s timeout: timed_out', JSON.stringify(r));
      t.expect(r?.exit_code === 137, 'exit code 137 (SIGKILL)', String(r?.exit_code));
      t.expect(r?.stdout === '', 'it never printed', JSON.stringify(r?.stdout));
    },
  }], { tag: 'a', prompt: 'Run the slow job.', finalText: () => 'The job timed out.' });

  t.section('Query B: the same task with sandboxPolicy {proc: {timeout: "10s"}}');
  await runAgent(w, t, [{
    ...slow('B'),
    check: (o, t) => {
      t.line('audit', opened());
      const r = expectRan(t, o);
      t.expect(r?.timed_out === false && r.reason === 'exited' && r.exit_code === 0, 'the run finished: exited with code 0', JSON.stringify(r));
      t.expect(r?.stdout === 'finished after 3 s\n', 'stdout "finished after 3 s"', JSON.stringify(r?.stdout));
    },
  }], { tag: 'b', prompt: 'Run the slow job.', sandboxPolicy: { proc: { timeout: '10s' } }, finalText: () => 'The job finished.' });

  t.section(`Query C: sandboxPolicy {net: {enabled: true, allow: ["${up.allowed.hostPort}"]}}`);
  t.line('upstream', `allowlisted http://${up.allowed.hostPort}/ and not allowlisted http://${up.denied.hostPort}/, both on the host's loopback`);
  await runAgent(w, t, [egressStep(up, 'the model fetches from the allowlisted host, and tries the others')], {
    tag: 'c',
    prompt: 'Fetch the data.',
    sandboxPolicy: { ...netOverride(up), proc: { timeout: '10s' } },
    finalText: () => 'Done.',
  });

  t.section('Query D: an override beyond the ceilings');
  const fake = await startFakeModel({ script: [{ type: 'text', text: 'this must never be sent' }] });
  const override = { proc: { memory: '8g', timeout: '10m' }, net: { enabled: true, allow: ['evil.example'] } };
  t.step('query', `the agent asks for sandboxPolicy ${JSON.stringify(override)}`);
  let err: unknown;
  let messages = 0;
  try {
    for await (const _ of query({
      prompt: 'Run anything.',
      options: { cwd: w.dirs.ws, env: fake.env(w.dirs.home), settingSources: [], gatekeeper: { url: w.url, tokenFile: w.tokenFile }, sandboxPolicy: override },
    })) messages++;
  } catch (e) {
    err = e;
  }
  await fake.close();
  if (err instanceof GatekeeperError) {
    t.line('gate', `${err.code}: ${String(err.violations.length)} violations`);
    for (const v of err.violations) t.line('', `· ${v}`);
  }
  t.expect(err instanceof GatekeeperError && err.code === 'policy_override_rejected', 'query() threw GatekeeperError policy_override_rejected', String(err));
  const vs = err instanceof GatekeeperError ? err.violations.join('\n') : '';
  t.expect(/sandbox\.proc\.memory 8g exceeds ceiling 1g/.test(vs), 'violation: memory 8g over the 1g ceiling', vs);
  t.expect(/timeout/.test(vs), 'violation: timeout 10m over the 120s ceiling', vs);
  t.expect(/evil\.example is not within ceilings\.net_hosts/.test(vs), 'violation: evil.example is not within ceilings.net_hosts', vs);
  t.expect(messages === 0 && fake.requests.length === 0, 'the model got zero requests: nothing was sent before the refusal', `messages ${String(messages)}, model requests ${String(fake.requests.length)}`);
  const rejected = readAudit(w.auditLog).filter((r) => r.kind === 'query' && r.decision === 'deny');
  t.expect(rejected.length === 1 && rejected[0]?.rule === 'override.rejected', 'the audit log records the refused override (rule override.rejected)', JSON.stringify(rejected));
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
  await up.close();
}
process.exit(t.finish());
