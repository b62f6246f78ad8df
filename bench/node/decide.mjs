// Decision round trip from Node, four ways, interleaved in rounds:
//
//   gatekeeper  @gatekeeper/client's public connect(): gk.options() opens a
//               sidecar query and returns the SDK options; the sample is one
//               call of its PreToolUse hook, which is what the Agent SDK
//               awaits before every tool call (decide frame over the
//               WebSocket, reply parsed, hook output built).
//   raw_ws      the same decide frame over a bare `ws` WebSocket: the
//               sidecar's share without the client library.
//   opa         OPA's REST server (`opa run --server`) with the same Rego:
//               POST /v1/data/gatekeeper/decision {"input": …} over a
//               kept-alive connection, body serialized and reply parsed per
//               call; the input is the one the sidecar builds.
//   js          the floor: the same decision as a plain JS function.
//
// Usage: node decide.mjs CONFIG.json (written by the Go driver). Writes the
// samples (nanoseconds) to config.out. Exits non-zero if any answer differs
// from the decision the sidecar's own CLI made.

import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { isDeepStrictEqual } from 'node:util';
import { Session } from 'node:inspector/promises';
import { decide as floorDecide } from './floor.mjs';

const cfg = JSON.parse(readFileSync(process.argv[2], 'utf8'));
const { connect } = await import(pathToFileURL(`${cfg.tsClient}/dist/index.js`).href);
const WebSocket = createRequire(`${cfg.tsClient}/package.json`)('ws');

const want = cfg.expected;
const mismatches = {};
const bad = (series, got) => {
  mismatches[series] ??= { count: 0, example: got };
  mismatches[series].count++;
};

// The JS floor must agree with the sidecar on every case the driver gives.
for (const c of cfg.floorCases) {
  const got = floorDecide(c.input);
  if (got.decision !== c.expected.decision || got.rule !== c.expected.rule) {
    console.error(`floor disagrees with the sidecar on ${c.name}: ${JSON.stringify(got)} vs ${JSON.stringify(c.expected)}`);
    process.exit(1);
  }
}

// gatekeeper through the TypeScript client.
const gk = connect({ url: cfg.url, tokenFile: cfg.tokenFile, decisionTimeoutMs: 2000 });
const options = await gk.options({ cwd: cfg.cwd });
const hook = options.hooks.PreToolUse[0].hooks[0];
const signal = new AbortController().signal;
const hookInput = {
  hook_event_name: 'PreToolUse',
  session_id: 'bench',
  transcript_path: '/dev/null',
  cwd: cfg.cwd,
  tool_name: cfg.call.tool_name,
  tool_input: cfg.call.tool_input,
  tool_use_id: cfg.call.tool_use_id,
};
const hookWant =
  want.decision === 'allow'
    ? {}
    : { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: want.decision, permissionDecisionReason: `${want.reason} [gatekeeper rule: ${want.rule}]` } };
async function viaClient() {
  const out = await hook(hookInput, cfg.call.tool_use_id, { signal });
  if (!isDeepStrictEqual(out, hookWant)) bad('gatekeeper', out);
}

// gatekeeper through a bare WebSocket.
const ws = new WebSocket(`ws+unix://${cfg.socket}:/v1/ws`, {
  headers: { Authorization: `Bearer ${readFileSync(cfg.tokenFile, 'utf8').trim()}` },
  perMessageDeflate: false,
});
let onReply;
ws.on('message', (data) => onReply(data.toString()));
await new Promise((resolve, reject) => {
  ws.once('open', resolve);
  ws.once('error', reject);
});
const rawRequest = (frame) =>
  new Promise((resolve) => {
    onReply = (s) => resolve(JSON.parse(s));
    ws.send(JSON.stringify(frame));
  });
await rawRequest({ type: 'hello', id: 'h', v: 1, client: 'gatekeeper-bench/raw' });
const opened = await rawRequest({ type: 'open_query', id: 'o' });
let n = 0;
async function viaRawWs() {
  const r = await rawRequest({ type: 'decide', id: String(++n), query_id: opened.query_id, event: 'PreToolUse', ...cfg.call });
  if (r.decision !== want.decision || r.rule !== want.rule || r.reason !== want.reason) bad('raw_ws', r);
}

// OPA's REST server.
const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function viaOpa() {
  const body = JSON.stringify({ input: cfg.input });
  return new Promise((resolve, reject) => {
    const req = http.request(
      {
        socketPath: cfg.opaSocket,
        path: '/v1/data/gatekeeper/decision',
        method: 'POST',
        agent,
        headers: { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(body) },
      },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          try {
            const r = JSON.parse(Buffer.concat(chunks).toString()).result;
            if (!isDeepStrictEqual(r, want)) bad('opa', r);
            resolve();
          } catch (err) {
            reject(err);
          }
        });
      },
    );
    req.on('error', reject);
    req.end(body);
  });
}

// The floor.
async function viaJs() {
  const r = floorDecide(cfg.input);
  if (r.decision !== want.decision || r.rule !== want.rule || r.reason !== want.reason) bad('js', r);
}

const series = { gatekeeper: viaClient, raw_ws: viaRawWs, opa: viaOpa, js: viaJs };
const names = Object.keys(series);
const samples = Object.fromEntries(names.map((k) => [k, []]));

for (let i = 0; i < cfg.warmup; i++) for (const k of names) await series[k]();

// Rounds of `batch` calls per series; the order rotates every round so no
// series always follows the same one.
const rounds = Math.ceil(cfg.samples / cfg.batch);
for (let r = 0; r < rounds; r++) {
  for (let j = 0; j < names.length; j++) {
    const k = names[(r + j) % names.length];
    const fn = series[k];
    const out = samples[k];
    for (let b = 0; b < cfg.batch; b++) {
      const t0 = process.hrtime.bigint();
      await fn();
      out.push(Number(process.hrtime.bigint() - t0));
    }
  }
}

const runQueueWaitNs = selfRunQueueWait();

// After the measurement, and only then (a profiler slows what it watches):
// a CPU profile of the client's own series, to see where Node's time goes.
const profile = cfg.profileCalls > 0 ? await profileClient(cfg.profileCalls) : undefined;

await gk.close();
ws.close();
agent.destroy();
writeFileSync(
  cfg.out,
  JSON.stringify({
    node: process.version,
    client: 'connect() → options() → PreToolUse hook',
    samples,
    mismatches,
    profile,
    run_queue_wait_ns: runQueueWaitNs,
  }),
);

/** selfRunQueueWait is how long this process's threads waited for a CPU (schedstat), in ns. */
function selfRunQueueWait() {
  let ns = 0;
  try {
    for (const t of readdirSync('/proc/self/task')) ns += Number(readFileSync(`/proc/self/task/${t}/schedstat`, 'utf8').split(' ')[1]);
  } catch {
    return -1;
  }
  return ns;
}

/**
 * profileClient runs `calls` hook calls under V8's sampling profiler and
 * returns the self time by where the code lives: the client library, the
 * ws package, Node's internals, native bindings, the garbage collector;
 * "(idle)" is the event loop waiting for the sidecar's reply.
 */
async function profileClient(calls) {
  const session = new Session();
  session.connect();
  await session.post('Profiler.enable');
  await session.post('Profiler.setSamplingInterval', { interval: 50 });
  await session.post('Profiler.start');
  const t0 = process.hrtime.bigint();
  for (let i = 0; i < calls; i++) await viaClient();
  const wallUs = Number(process.hrtime.bigint() - t0) / 1000;
  const { profile: p } = await session.post('Profiler.stop');
  session.disconnect();
  const self = new Map(); // node id → µs
  for (let i = 0; i < p.samples.length; i++) self.set(p.samples[i], (self.get(p.samples[i]) ?? 0) + (p.timeDeltas[i] ?? 0));
  const byPlace = {};
  const byFunction = {};
  let total = 0;
  for (const n of p.nodes) {
    const us = self.get(n.id) ?? 0;
    if (us === 0) continue;
    const { url, functionName } = n.callFrame;
    let place;
    if (functionName === '(idle)') place = '(idle: waiting for the reply)';
    else if (url === '' && functionName === 'dispatch') continue; // the profiler serializing its own profile at Profiler.stop
    else if (functionName === '(garbage collector)') place = 'garbage collector';
    else if (functionName === '(program)') place = 'V8 and native code';
    else if (url === '') place = 'native bindings (socket writev, microtasks, UTF-8)';
    else if (url.includes('/ts-client/dist/')) place = '@gatekeeper/client';
    else if (url.includes('/node_modules/ws/')) place = 'ws (WebSocket framing)';
    else if (url.startsWith('node:')) place = 'Node internals (streams, net, timers)';
    else if (url.includes('/bench/node/')) place = 'this harness';
    else place = 'other';
    byPlace[place] = (byPlace[place] ?? 0) + us;
    if (place !== '(idle: waiting for the reply)') {
      const key = `${functionName || '(anonymous)'} ${url.replace(/^.*\/(ts-client|node_modules)\//, '$1/')}:${n.callFrame.lineNumber + 1}`;
      byFunction[key] = (byFunction[key] ?? 0) + us;
    }
    total += us;
  }
  const top = Object.entries(byFunction)
    .sort((a, b) => b[1] - a[1])
    .slice(0, 15)
    .map(([name, us]) => ({ name, us_per_call: us / calls }));
  const places = Object.entries(byPlace)
    .sort((a, b) => b[1] - a[1])
    .map(([name, us]) => ({ name, us_per_call: us / calls }));
  return { calls, wall_us_per_call: wallUs / calls, profiled_us_per_call: total / calls, places, top };
}
if (Object.keys(mismatches).length > 0) {
  console.error(`answers differ from the sidecar's decision ${JSON.stringify(want)}: ${JSON.stringify(mismatches)}`);
  process.exit(1);
}
