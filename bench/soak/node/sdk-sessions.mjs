// Real Agent SDK sessions for the soak: each session runs query() from
// @gatekeeper/client (the Claude Code binary under the SDK, pointed at the
// scripted fake model on loopback) again and again, each query a cycle of
// tool calls whose outcomes the policy fixes: a read inside the workspace,
// a read outside it, Bash, and a sandboxed run. It runs until its standard
// input closes, lets the queries under way end, and writes every call,
// with when the model made it and what it got back, to config.out.
//
// Usage: node sdk-sessions.mjs CONFIG.json (written by bench/soak).

import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { pathToFileURL } from 'node:url';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { query } = await import(pathToFileURL(`${cfg.tsClient}/dist/index.js`).href);
const { startFakeModel } = await import(pathToFileURL(`${cfg.tsClient}/dist/testing/index.js`).href);

let stopping = false;
process.stdin.on('end', () => {
  stopping = true;
});
process.stdin.on('error', () => {
  stopping = true;
});
process.stdin.resume();

/**
 * The cycle of calls, with the rule a deny must name. The client reads the
 * policy and leaves Bash, which it denies, out of the agent's tools: Claude
 * Code itself then refuses the call (bench/soak checks for that refusal).
 */
const CYCLE = [
  { kind: 'read_in', name: 'Read', input: () => ({ file_path: join(cfg.ws, 'f1.txt') }) },
  { kind: 'read_out', name: 'Read', input: () => ({ file_path: '/etc/passwd' }), rule: 'host_fs.outside_workspace' },
  { kind: 'bash', name: 'Bash', input: () => ({ command: 'cat ~/.ssh/id_rsa' }), rule: 'client: Bash left out' },
  { kind: 'run_hello', name: 'mcp__sandboxed_code__run', input: () => ({ language: 'python', code: 'print("hello sdk")' }) },
];
const CALLS_PER_QUERY = 12;

const calls = [];
const errors = [];
let queries = 0;

async function session(n) {
  for (let qn = 0; !stopping; qn++) {
    queries++;
    const made = [];
    const script = [];
    for (let i = 0; i < CALLS_PER_QUERY; i++) {
      script.push(() => {
        if (made.length > 0) made[made.length - 1].resulted = Date.now();
        if (stopping) return { type: 'text', text: 'stopping' };
        const c = CYCLE[(qn + i) % CYCLE.length];
        const id = `toolu_sdk_${n}_${qn}_${i}`;
        made.push({ session: n, query: qn, kind: c.kind, tool: c.name, rule: c.rule ?? '', id, emitted: Date.now() });
        return { type: 'tool_use', name: c.name, input: c.input(), id };
      });
    }
    script.push(() => {
      if (made.length > 0) made[made.length - 1].resulted = Date.now();
      return { type: 'text', text: 'done' };
    });
    const fake = await startFakeModel({ script });
    const started = Date.now();
    const q = query({
      prompt: 'Work through the soak script.',
      options: {
        cwd: cfg.ws,
        env: fake.env(cfg.home),
        settingSources: [],
        maxTurns: CALLS_PER_QUERY + 3,
        gatekeeper: { url: cfg.url, tokenFile: cfg.tokenFile },
      },
    });
    let err;
    const timer = setTimeout(() => {
      err = new Error('the query was still running after 180 s');
      q.close();
    }, 180_000);
    try {
      for await (const _m of q) {
        // the messages are not needed: the fake model saw every result
      }
    } catch (e) {
      err ??= e;
    } finally {
      clearTimeout(timer);
    }
    for (const c of made) {
      const r = fake.toolResult(c.id);
      calls.push({ ...c, got: r !== undefined, is_error: r?.is_error ?? false, text: (r?.text ?? '').slice(0, 400) });
    }
    for (const e of fake.errors) errors.push({ from: started, to: Date.now(), text: `session ${n} query ${qn}: fake model: ${e}` });
    if (err !== undefined) errors.push({ from: started, to: Date.now(), text: `session ${n} query ${qn}: ${String(err).slice(0, 400)}` });
    await fake.close();
    // A query refused at its start (the sidecar down, its audit log full)
    // made no call: wait a little before the next, as an agent would.
    if (made.length === 0) await new Promise((r) => setTimeout(r, 1000));
  }
}

await Promise.all(Array.from({ length: cfg.sessions }, (_, i) => session(i + 1)));
writeFileSync(cfg.out, JSON.stringify({ queries, calls, errors }, null, 1));
process.exit(0);
