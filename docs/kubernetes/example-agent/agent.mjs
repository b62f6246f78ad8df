// The example agent of docs/kubernetes: a Node program that runs Agent SDK
// queries through @gatekeeper/client against the gatekeeper sidecar of its
// own Pod, with the scripted fake model (from @gatekeeper/client/testing) on
// loopback standing in for the Messages API. Each query's model asks for one
// mcp__sandboxed_code__run (python) that prints a marker; the sidecar runs
// it in a sandbox Pod. One JSON line per query goes to stdout, for
// `kubectl logs` (and the cluster test, cmd/gatekeeper/kube_agent_test.go).
//
// Environment: GATEKEEPER_URL and GATEKEEPER_TOKEN_FILE (the client's own),
// POD_NAME (for the marker), AGENT_QUERIES (how many; 0 runs until
// stopped), AGENT_SLEEP_S (how long the sandboxed code sleeps, so that a
// run is seen in flight), AGENT_WORKDIR (the agent's working directory).
import { mkdirSync } from 'node:fs';
import { query } from '@gatekeeper/client';
import { startFakeModel } from '@gatekeeper/client/testing';

const pod = process.env.POD_NAME ?? 'agent';
const queries = Number(process.env.AGENT_QUERIES ?? '0');
const sleepS = Number(process.env.AGENT_SLEEP_S ?? '0');
const workdir = process.env.AGENT_WORKDIR ?? '/tmp/agent';
const home = `${workdir}/home`;
mkdirSync(home, { recursive: true });

const log = (o) => process.stdout.write(`${JSON.stringify({ time: new Date().toISOString(), pod, ...o })}\n`);

// runOnce runs query n and resolves to its log line.
async function runOnce(n) {
  const marker = `gk-agent-marker ${pod} ${String(n)}`;
  const id = `toolu_kube_${String(n)}`;
  const code = `import time\ntime.sleep(${String(sleepS)})\nprint(${JSON.stringify(marker)})`;
  const fake = await startFakeModel({
    script: [
      () => ({ type: 'tool_use', name: 'mcp__sandboxed_code__run', input: { language: 'python', code }, id }),
      () => ({ type: 'text', text: 'Done.' }),
    ],
  });
  const t0 = Date.now();
  const stderr = [];
  let error;
  try {
    const q = query({
      prompt: `Run query ${String(n)}'s code.`,
      options: { cwd: workdir, env: fake.env(home), settingSources: [], maxTurns: 4, stderr: (d) => stderr.push(d) },
    });
    for await (const _ of q) {
      // the result is read from the model's side: the tool_result it got
    }
  } catch (err) {
    error = err instanceof Error ? err.message : String(err);
  } finally {
    await fake.close();
  }
  const result = fake.toolResult(id);
  let report;
  try {
    const blocks = Array.isArray(result?.content) ? result.content : [];
    const text = typeof result?.content === 'string' ? result.content : (blocks.filter((b) => b.type === 'text').at(-1)?.text ?? result?.text);
    report = JSON.parse(text);
  } catch {
    report = undefined;
  }
  const ok = error === undefined && result?.is_error !== true && report?.exit_code === 0 && String(report?.stdout ?? '').includes(marker);
  const line = { query: n, ok, ms: Date.now() - t0, reason: report?.reason, exit_code: report?.exit_code, stdout: report?.stdout };
  if (!ok) Object.assign(line, { error, tool_result: result?.text?.slice(0, 500), stderr: stderr.join('').slice(-1000) });
  return line;
}

// A SIGTERM (the Pod deleted) ends the agent at once, a query in flight
// included: its connection closes, and the sidecar, still running until the
// agent has exited (a native sidecar stops after the main containers),
// cancels the run and deletes its sandbox Pod.
process.on('SIGTERM', () => {
  log({ event: 'sigterm' });
  process.exit(0);
});
log({ event: 'start', queries, sleep_s: sleepS });
for (let n = 1; queries === 0 || n <= queries; n++) {
  log(await runOnce(n));
}
log({ event: 'done' });
// The StatefulSet restarts a container that exits; a finished agent waits
// to be stopped, so that its log stays what was read.
setInterval(() => {}, 1 << 30);
