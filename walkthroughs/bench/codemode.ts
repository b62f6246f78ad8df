// The measurements of code mode for `make bench` (bench/codemode.go runs
// this and computes the ratios): two tasks, each done both ways through the
// real Agent SDK (Claude Code) via @gatekeeper/client, with the scripted
// fake model on loopback, against one real sidecar. Both sides are offered
// the same tools: no Claude Code built-in (`tools: []`), and the four MCP
// tools the policy lets code call (records and lookup of crm and billing),
// as schemas on the direct side and behind the run tool on the code side.
// The script checks each side's tool listing and fails when it differs.
//
// Data task: 500 records from each of two servers, joined and summarised;
// every side answers with the same three lines.
//   code:            a discovery run reading the two wrappers (as the run
//                    tool's description says), then one program (walkthrough
//                    8's join less its CSV), then the answer; the
//                    program is sent only after the discovery result shows
//                    records(page, size) and the result's records/more.
//   direct_serial:   a page of each server per turn: 5 turns, then the answer.
//   direct_parallel: page 1 of both; page 1 says total 500, so pages 2-5 of
//                    both in one turn of 8 parallel calls; then the answer.
// See task: five records the model must read itself and judge.
//   see_code:   a discovery run reading crm's wrapper, a program printing
//               the five records, the judgement.
//   see_direct: five lookups in one turn, the judgement.
//
// Rounds run the five queries in an order that alternates (ABBA: forward,
// then reversed); each timed query starts only when the sidecar's pool is
// full and making nothing. Prints one JSON object on stdout: per query kind,
// one sample per round, each with its model turns.
//
//   node build/bench/codemode.js [--rounds N]

import { request } from 'node:http';
import { query } from '@gatekeeper/client';
import { startFakeModel, type FakeScriptStep, type FakeToolResult, type FakeTurn } from '@gatekeeper/client/testing';
import { buildServer, CODE_CALLS, joinSummary, makeRecord, mcpServers, PAGE, RECORDS, startHTTPServer } from '../lib/codemode.js';
import { RUN } from '../lib/agent.js';
import { DEFAULT_ALLOW, startWorld, type World } from '../lib/world.js';

/** Turn is one model request and what the model answered to it. */
interface Turn {
  /** Bytes of the request body (JSON): everything the model reads this turn. */
  in_bytes: number;
  /** Bytes of its tool listing (`tools`, JSON): the schemas, or the run tool's description. */
  tools_bytes: number;
  /** Bytes at its start equal to the previous request's: what a prompt cache would serve. */
  cached_bytes: number;
  /** Bytes the model wrote: each tool_use's name and input (JSON; a program is in it), or its text. */
  out_bytes: number;
  /** From this request's arrival to the next one's (or to the query's result): the tools, the sandbox and Claude Code, ms. */
  after_ms: number;
  /** Tool calls the turn made. */
  calls: number;
}

/** Sample is one query's measurements. */
interface Sample {
  /** From query() to its result message, ms (Claude Code's start included). */
  wall_ms: number;
  /** From the model's first request to the query's result, ms: the task itself, with a model answering at once. */
  task_ms: number;
  /** Bytes of the tool_result blocks the model received, each counted once. */
  tool_result_bytes: number;
  /** The tool names of the first request's listing. */
  tools: string[];
  turns: Turn[];
}

const rounds = Number(/--rounds[= ](\d+)/.exec(process.argv.slice(2).join(' '))?.[1] ?? '3');

/** The tools both sides may use: the policy's code_calls.callable, as MCP names. */
const OFFERED = Object.entries(CODE_CALLS.callable).flatMap(([server, tools]) => tools.map((t) => `mcp__${server}__${t}`));
/** Every tool of the test server (runner/mcpservers/mcptest/tools.go); all but OFFERED are kept out of the direct side's listing. */
const SERVER_TOOLS = ['records', 'lookup', 'delete_record', 'sleep', 'hang', 'crash', 'big', 'fail', 'secret_digest', 'pid', 'spawn'];
const HIDDEN = ['crm', 'billing'].flatMap((s) => SERVER_TOOLS.map((t) => `mcp__${s}__${t}`)).filter((n) => !OFFERED.includes(n));

/** commonPrefix is the length in bytes of the longest common prefix of a and b. */
function commonPrefix(a: Buffer, b: Buffer): number {
  const n = Math.min(a.length, b.length);
  let i = 0;
  while (i < n && a[i] === b[i]) i++;
  return i;
}

/** outBytes is what the model writes for turn: tool names and inputs as JSON, or its text. */
function outBytes(turn: FakeTurn): number {
  if (turn.type === 'text') return Buffer.byteLength(turn.text);
  const calls = turn.type === 'tool_use' ? [turn] : turn.calls;
  return calls.reduce((n, c) => n + Buffer.byteLength(c.name) + Buffer.byteLength(JSON.stringify(c.input)), 0);
}

/** poolMetrics reads the sidecar's pool gauges: warm, making and target containers, summed over pools. */
function poolMetrics(w: World): Promise<{ warm: number; making: number; target: number }> {
  return new Promise((resolve, reject) => {
    const req = request({ socketPath: w.socketPath, path: '/metrics', headers: { authorization: `Bearer ${w.token()}` }, timeout: 2000 }, (res) => {
      let text = '';
      res.on('data', (d: Buffer) => (text += d.toString('utf8')));
      res.on('end', () => {
        const sum = (name: string): number =>
          text
            .split('\n')
            .filter((l) => l.startsWith(name))
            .reduce((n, l) => n + Number(l.split(' ').pop()), 0);
        resolve({ warm: sum('gatekeeper_pool_warm_containers'), making: sum('gatekeeper_pool_making_containers'), target: sum('gatekeeper_pool_target_containers') });
      });
    });
    req.on('error', reject);
    req.end();
  });
}

/** waitPoolReady waits until the pool holds its target (at least one) warm containers and makes none. */
async function waitPoolReady(w: World): Promise<void> {
  const deadline = Date.now() + 60_000;
  for (;;) {
    const m = await poolMetrics(w);
    if (m.warm >= Math.max(1, m.target) && m.making === 0) return;
    if (Date.now() > deadline) throw new Error(`the pool is not ready after a minute: ${JSON.stringify(m)}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** A scripted step: a fixed turn, or one made from the tool results the model just read. */
type Step = FakeTurn | ((results: FakeToolResult[]) => FakeTurn);

/** one runs one query with script and measures it; check throws when its outcome is wrong. */
async function one(w: World, script: Step[], o: { direct: boolean; check: (results: FakeToolResult[]) => void }): Promise<Sample> {
  const arrive: number[] = [];
  const out: number[] = [];
  const calls: number[] = [];
  const steps: FakeScriptStep[] = script.map((s) => (ctx) => {
    arrive.push(performance.now());
    const turn = typeof s === 'function' ? s(ctx.toolResults) : s;
    out.push(outBytes(turn));
    calls.push(turn.type === 'tool_uses' ? turn.calls.length : turn.type === 'tool_use' ? 1 : 0);
    return turn;
  });
  const fake = await startFakeModel({ script: steps });
  await waitPoolReady(w);
  const begin = performance.now();
  let end = 0;
  const stderr: string[] = [];
  try {
    const q = query({
      prompt: 'Work with our customer records.',
      options: {
        cwd: w.dirs.ws,
        env: fake.env(w.dirs.home),
        settingSources: [],
        tools: [],
        maxTurns: script.length + 2,
        stderr: (d: string) => stderr.push(d),
        ...(o.direct ? { mcpServers: sdkServers as never, disallowedTools: [...HIDDEN, RUN] } : {}),
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
  if (fake.turns.length !== script.length) throw new Error(`the model was asked ${String(fake.turns.length)} times, its script has ${String(script.length)} turns`);
  const results = fake.toolResults();
  o.check(results);
  const bodies = fake.turns.map((t) => Buffer.from(JSON.stringify(t.body)));
  // What a cache keyed on the request's prefix could serve: the listing, the system prompt and the messages so far, in the order the API reads them.
  // The cache_control marks are left out: they mark where to cache, they are not content, and Claude Code moves them each turn.
  const prefixes = fake.turns.map((t) => {
    const b = t.body as { tools?: unknown; system?: unknown; messages?: unknown };
    return Buffer.from(JSON.stringify([b.tools, b.system, b.messages], (k, v: unknown) => (k === 'cache_control' ? undefined : v)));
  });
  const tools = ((fake.turns[0]?.body as { tools?: { name: string }[] }).tools ?? []).map((t) => t.name).sort();
  return {
    wall_ms: end - begin,
    task_ms: end - (arrive[0] ?? end),
    tool_result_bytes: results.reduce((n, r) => n + Buffer.byteLength(JSON.stringify(r.content)), 0),
    tools,
    turns: fake.turns.map((t, i) => ({
        in_bytes: bodies[i]?.length ?? 0,
        tools_bytes: Buffer.byteLength(JSON.stringify((t.body as { tools?: unknown }).tools ?? [])),
        cached_bytes: i === 0 ? 0 : commonPrefix(prefixes[i - 1] ?? Buffer.alloc(0), prefixes[i] ?? Buffer.alloc(0)),
        out_bytes: out[i] ?? 0,
        after_ms: (arrive[i + 1] ?? end) - (arrive[i] ?? end),
        calls: calls[i] ?? 0,
    })),
  };
}

const bin = buildServer();
const billing = await startHTTPServer(bin, 'billing');
const w = await startWorld({
  n: 80,
  policy: { mcpServers: mcpServers(bin, billing.url), codeCalls: CODE_CALLS, netEnabled: false, allow: [...DEFAULT_ALLOW, ...OFFERED] },
});
// The SDK's own MCP servers for the direct runs: the same two servers.
const sdkServers = {
  crm: { type: 'stdio', command: bin, args: ['-name', 'crm', '-records', String(RECORDS)] },
  billing: { type: 'http', url: billing.url },
};

const pages = Math.ceil(RECORDS / PAGE);
const page = (p: number) => [
  { name: 'mcp__crm__records', input: { page: p, size: PAGE } },
  { name: 'mcp__billing__records', input: { page: p, size: PAGE } },
];
const range = (a: number, b: number): number[] => Array.from({ length: b - a + 1 }, (_, i) => a + i);

/** readWrappers is the discovery program: it prints the wrappers of modules, as the run tool's description says to. */
const readWrappers = (modules: string[]): string =>
  `import os\nd = os.path.join(os.environ["GATEKEEPER_TOOLS"], "python", "gatekeeper_tools")\n` + modules.map((m) => `print(open(os.path.join(d, "${m}.py")).read())\n`).join('');

/** learned throws unless the discovery run's result shows every one of needles: the model writes no call it has not read. */
function learned(results: FakeToolResult[], needles: RegExp[]): void {
  const text = results.map((r) => r.text).join('\n');
  const missing = needles.filter((n) => !n.test(text));
  if (results.length !== 1 || results[0]?.is_error === true || missing.length > 0) throw new Error(`discovery did not show ${missing.map(String).join(', ')}: ${text.slice(0, 600)}`);
}

// The data task. Both sides end with the same answer, the three lines of
// summary. The code side's program does what the direct side does, no
// more: it pages, joins and prints the summary (walkthrough 8's program
// also writes a CSV, which the direct side could not).
const joinLines = joinSummary();
const SUMMARY_PROGRAM = `import gatekeeper_tools.crm as crm
import gatekeeper_tools.billing as billing

def every(server):
    rows, page = [], 1
    while True:
        r = server.records(page=page, size=${String(PAGE)})
        rows += r["records"]
        if not r["more"]:
            return rows
        page += 1

customers = every(crm)
amount = {r["id"]: r["score"] for r in every(billing)}
by_city = {}
for c in customers:
    by_city[c["city"]] = by_city.get(c["city"], 0) + amount[c["id"]]
top = max(sorted(by_city), key=by_city.get)
print(f"joined {len(customers)} customers with {len(amount)} invoices")
print(f"total {sum(amount[c['id']] for c in customers)}")
print(f"top city {top} {by_city[top]}")
`;
const codeData: Step[] = [
  { type: 'tool_use', name: RUN, input: { language: 'python', code: readWrappers(['crm', 'billing']) } },
  (rs) => {
    learned(rs, [/def records\(/, /\bpage\b/, /\bsize\b/, /\bmore\b/, /\brecords\b/]);
    return { type: 'tool_use', name: RUN, input: { language: 'python', code: SUMMARY_PROGRAM } };
  },
  { type: 'text', text: joinLines },
];
const directSerial: Step[] = [...range(1, pages).map((p): FakeTurn => ({ type: 'tool_uses', calls: page(p) })), { type: 'text', text: joinLines }];
const directParallel: Step[] = [
  { type: 'tool_uses', calls: page(1) },
  (rs) => {
    // Page 1 says how many there are: ask for the rest of both at once.
    const total = Math.min(...rs.map((r) => (JSON.parse(r.text) as { total: number }).total));
    return { type: 'tool_uses', calls: range(2, Math.ceil(total / PAGE)).flatMap(page) };
  },
  { type: 'text', text: joinLines },
];

// The see task: five records the model reads and judges (a score of 50 or more is good).
const SEE = [3, 14, 15, 92, 65];
const judgement = SEE.map((id) => makeRecord('crm', id))
  .map((r) => `${r.name}: ${r.score >= 50 ? 'good' : 'weak'}`)
  .join('; ');
const SEE_PROGRAM = `import gatekeeper_tools.crm as crm\nfor i in ${JSON.stringify(SEE)}:\n    print(crm.lookup(id=i))\n`;
const judge = (rs: FakeToolResult[]): FakeTurn => {
  const seen = SEE.map((id) => makeRecord('crm', id)).filter((r) => rs.some((x) => x.text.includes(`crm-${String(r.id)}'`) || x.text.includes(`"crm-${String(r.id)}"`)));
  if (seen.length !== SEE.length) throw new Error(`the model saw ${String(seen.length)} of the ${String(SEE.length)} records: ${JSON.stringify(rs).slice(0, 600)}`);
  return { type: 'text', text: judgement };
};
const seeCode: Step[] = [
  { type: 'tool_use', name: RUN, input: { language: 'python', code: readWrappers(['crm']) } },
  (rs) => {
    learned(rs, [/def lookup\(/, /\bid\b/]);
    return { type: 'tool_use', name: RUN, input: { language: 'python', code: SEE_PROGRAM } };
  },
  judge,
];
const seeDirect: Step[] = [{ type: 'tool_uses', calls: SEE.map((id) => ({ name: 'mcp__crm__lookup', input: { id } })) }, judge];

const records = (n: number) => (rs: FakeToolResult[]): void => {
  if (rs.length !== n || rs.some((r) => r.is_error || !/crm-|billing-/.test(r.text))) throw new Error(`want ${String(n)} record results, got ${JSON.stringify(rs).slice(0, 600)}`);
};
const printed = (line: string) => (rs: FakeToolResult[]): void => {
  if (rs.length !== 2 || rs.some((r) => r.is_error) || !rs[1]?.text.includes(line)) throw new Error(`want a discovery run and a run printing ${JSON.stringify(line)}, got ${JSON.stringify(rs).slice(0, 600)}`);
};

const kinds: Record<string, () => Promise<Sample>> = {
  code: () => one(w, codeData, { direct: false, check: printed(JSON.stringify(joinLines).slice(1, -1)) }),
  direct_serial: () => one(w, directSerial, { direct: true, check: records(2 * pages) }),
  direct_parallel: () => one(w, directParallel, { direct: true, check: records(2 * pages) }),
  see_code: () => one(w, seeCode, { direct: false, check: printed(`'name': 'crm-${String(SEE[0])}'`) }),
  see_direct: () => one(w, seeDirect, { direct: true, check: records(SEE.length) }),
};

/**
 * sameTools throws unless the direct side lists exactly the offered tools
 * and the code side exactly the run tool, besides Claude Code's own
 * placeholder for deferred tools (listed with no built-in tools, on both sides).
 */
function sameTools(kind: string, s: Sample): void {
  const want = [...(kind.includes('direct') ? OFFERED : [RUN]), PLACEHOLDER].sort();
  if (JSON.stringify(s.tools) !== JSON.stringify(want)) throw new Error(`${kind}: the model was offered ${JSON.stringify(s.tools)}, want ${JSON.stringify(want)}`);
}

const PLACEHOLDER = 'DeferredToolPlaceholder';
const out: Record<string, Sample[]> = Object.fromEntries(Object.keys(kinds).map((k) => [k, []]));
const order: string[][] = [];
try {
  // One untimed round first: Claude Code's and the pool's first start, the servers' first connection.
  for (let r = 0; r <= rounds; r++) {
    const names = Object.keys(kinds);
    if (r % 2 === 1) names.reverse();
    const got: [string, Sample][] = [];
    for (const k of names) {
      const s = await kinds[k]!();
      sameTools(k, s);
      got.push([k, s]);
    }
    if (r === 0) continue;
    order.push(names);
    for (const [k, v] of got) out[k]?.push(v);
    process.stderr.write(`codemode: round ${String(r)}/${String(rounds)}: ${got.map(([k, v]) => `${k} ${v.task_ms.toFixed(0)} ms`).join(', ')}\n`);
  }
} finally {
  await w.stop();
  billing.stop();
}
console.log(JSON.stringify({ rounds, records: RECORDS, page: PAGE, see: SEE.length, order, samples: out }));
