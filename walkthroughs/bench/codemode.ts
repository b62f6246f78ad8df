// The measurements of code mode for `make bench` (bench/codemode.go runs
// this and reports the ratios): one data task done both ways through the
// real Agent SDK (Claude Code) via @gatekeeper/client, with the scripted
// fake model on loopback, against one real sidecar.
//
//   direct: the model calls the MCP tools itself. The two servers are the
//     SDK's own MCP servers of the query (the same Go SDK test servers), and
//     every result enters the model's context. It pages both servers at
//     once, a page of each per turn (two tool_use blocks): 5 turns, then its
//     answer.
//   code:   the model writes one program (lib/codemode.ts's JOIN_PROGRAM),
//     which makes the same ten calls through gatekeeper's bridge.
//
// And a control task of one lookup: the tool called directly vs a program
// making the one call. Rounds alternate the four queries. Prints one JSON
// object on stdout: per query kind, one sample per round.
//
//   node build/bench/codemode.js [--rounds N]

import { query } from '@gatekeeper/client';
import { startFakeModel, type FakeScriptStep, type FakeTurn } from '@gatekeeper/client/testing';
import { buildServer, CODE_CALLS, joinSummary, JOIN_PROGRAM, mcpServers, PAGE, RECORDS, startHTTPServer } from '../lib/codemode.js';
import { RUN } from '../lib/agent.js';
import { DEFAULT_ALLOW, startWorld, type World } from '../lib/world.js';

/** Sample is one query's measurements. */
interface Sample {
  /** From query() to its result message, ms (Claude Code's start included). */
  wall_ms: number;
  /** From the model's first request to the query's result, ms: the task itself. */
  task_ms: number;
  /** The model's turn requests. */
  requests: number;
  /** Bytes of the tool_result blocks the model received, each counted once (their content as JSON). */
  tool_result_bytes: number;
  /** Bytes of every turn request body the model received (the context, resent each turn). */
  request_bytes: number;
  tool_results: number;
}

const rounds = Number(/--rounds[= ](\d+)/.exec(process.argv.slice(2).join(' '))?.[1] ?? '3');
const CONTROL_ID = 7;
const CONTROL_PROGRAM = `import gatekeeper_tools.crm as crm\nprint(crm.lookup(id=${String(CONTROL_ID)}))\n`;

const DIRECT_TOOLS = ['mcp__crm__records', 'mcp__billing__records', 'mcp__crm__lookup'];

/** one runs one query with script and measures it; check throws when its outcome is wrong. */
async function one(w: World, script: FakeTurn[], o: { sdkServers?: Record<string, unknown>; check: (results: { text: string; is_error: boolean }[]) => void }): Promise<Sample> {
  let first = 0;
  const steps: FakeScriptStep[] = script.map((turn) => () => {
    if (first === 0) first = performance.now();
    return turn;
  });
  const fake = await startFakeModel({ script: steps });
  const begin = performance.now();
  let end = 0;
  const stderr: string[] = [];
  try {
    const q = query({
      prompt: 'Join our 500 customers with their invoices and summarise.',
      options: {
        cwd: w.dirs.ws,
        env: fake.env(w.dirs.home),
        settingSources: [],
        maxTurns: script.length + 2,
        stderr: (d: string) => stderr.push(d),
        ...(o.sdkServers ? { mcpServers: o.sdkServers as never } : {}),
        gatekeeper: { url: w.url, tokenFile: w.tokenFile },
      },
    });
    for await (const m of q) {
      if (m.type === 'result') {
        end = performance.now();
        if (m.subtype !== 'success') throw new Error(`the query ended ${m.subtype}`);
      }
    }
  } catch (err) {
    throw new Error(`${String(err)}\nClaude Code stderr:\n${stderr.join('').slice(-2000)}\nsidecar log:\n${w.log().slice(-2000)}`);
  } finally {
    await fake.close();
  }
  if (fake.errors.length > 0) throw new Error(`fake model: ${fake.errors.join('; ')}`);
  const results = fake.toolResults();
  o.check(results);
  return {
    wall_ms: end - begin,
    task_ms: end - first,
    requests: fake.turns.length,
    tool_result_bytes: results.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r.content)), 0),
    request_bytes: fake.turns.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r.body)), 0),
    tool_results: results.length,
  };
}

const bin = buildServer();
const billing = await startHTTPServer(bin, 'billing');
const w = await startWorld({
  n: 80,
  policy: { mcpServers: mcpServers(bin, billing.url), codeCalls: CODE_CALLS, netEnabled: false, allow: [...DEFAULT_ALLOW, ...DIRECT_TOOLS] },
});
// The SDK's own MCP servers for the direct runs: the same two servers.
const sdkServers = {
  crm: { type: 'stdio', command: bin, args: ['-name', 'crm', '-records', String(RECORDS)] },
  billing: { type: 'http', url: billing.url },
};
const pages = Math.ceil(RECORDS / PAGE);
const directData: FakeTurn[] = [];
for (let p = 1; p <= pages; p++) {
  directData.push({
    type: 'tool_uses',
    calls: [
      { name: 'mcp__crm__records', input: { page: p, size: PAGE } },
      { name: 'mcp__billing__records', input: { page: p, size: PAGE } },
    ],
  });
}
directData.push({ type: 'text', text: 'Joined.' });
const codeData: FakeTurn[] = [{ type: 'tool_use', name: RUN, input: { language: 'python', code: JOIN_PROGRAM } }, { type: 'text', text: 'Joined.' }];
const directControl: FakeTurn[] = [{ type: 'tool_use', name: 'mcp__crm__lookup', input: { id: CONTROL_ID } }, { type: 'text', text: 'Found.' }];
const codeControl: FakeTurn[] = [{ type: 'tool_use', name: RUN, input: { language: 'python', code: CONTROL_PROGRAM } }, { type: 'text', text: 'Found.' }];

const want = joinSummary();
const okDirect = (n: number) => (rs: { text: string; is_error: boolean }[]): void => {
  if (rs.length !== n || rs.some((r) => r.is_error || !/crm-|billing-/.test(r.text))) throw new Error(`direct: want ${String(n)} record results, got ${JSON.stringify(rs).slice(0, 600)}`);
};
const okCode = (line: string) => (rs: { text: string; is_error: boolean }[]): void => {
  if (rs.length !== 1 || rs[0]?.is_error || !rs[0]?.text.includes(line)) throw new Error(`code: want a run printing ${JSON.stringify(line)}, got ${JSON.stringify(rs).slice(0, 600)}`);
};

const out: Record<string, Sample[]> = { direct: [], code: [], control_direct: [], control_code: [] };
try {
  // One untimed round first: Claude Code's and the pool's first start, the servers' first connection.
  for (let r = 0; r <= rounds; r++) {
    const s = {
      direct: await one(w, directData, { sdkServers, check: okDirect(2 * pages) }),
      code: await one(w, codeData, { check: okCode(JSON.stringify(want).slice(1, -1)) }),
      control_direct: await one(w, directControl, { sdkServers, check: okDirect(1) }),
      control_code: await one(w, codeControl, { check: okCode(`'name': 'crm-${String(CONTROL_ID)}'`) }),
    };
    if (r === 0) continue;
    for (const [k, v] of Object.entries(s)) out[k]?.push(v);
    process.stderr.write(`codemode: round ${String(r)}/${String(rounds)}: ${Object.entries(s).map(([k, v]) => `${k} ${v.task_ms.toFixed(0)} ms`).join(', ')}\n`);
  }
} finally {
  await w.stop();
  billing.stop();
}
console.log(JSON.stringify({ rounds, records: RECORDS, page: PAGE, samples: out }));
