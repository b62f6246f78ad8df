// Walkthrough 9: sessions. The agent builder turns a session on for one
// query with its policy override (sandbox.session.idle_timeout), and the
// model works as in a notebook, one call at a time, each using what the
// one before left in the interpreter: it loads a CSV into a pandas
// DataFrame, ranks customers from that DataFrame after removing the file
// (no NameError: the variable is still there), looks the top customers up
// in an MCP server through code mode's bridge, and draws a chart it never
// saves, which comes back as a PNG. Then two shell calls: a cd and an
// export in one, relied on in the next. Every run reports its number in
// the session, and the audit log has the session's start and its end when
// the query closes.

import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxRun } from '@gatekeeper/client';
import { expectRan, runAgent, RUN, type Outcome, type Step } from './lib/agent.js';
import { buildServer, serverCalls } from './lib/codemode.js';
import { byCustomer, loadSummary, LOAD, namesPrinted, NAMES, ordersCSV, PLOT, plotPrinted, RANK, rankShown, REPORT_DIR, REPORT_TAG, SHELL_AFTER, SHELL_CD, TOP } from './lib/notebook.js';
import { clip, Transcript } from './lib/transcript.js';
import { GATEKEEPER_BIN, readAudit, RUNNER, startWorld, verifyAudit, type AuditRecord } from './lib/world.js';
import { imagesReceived, pngSize } from './workloads/lib.js';

const t = new Transcript(9, 'Sessions');
t.header(
  'The agent builder turns a session on for the query (sandboxPolicy.session.idle_timeout); the model then works as in a notebook:',
  'a DataFrame loaded in one call is used in the next, a code-mode call to an MCP server comes in the middle, a chart left open',
  `comes back as a PNG, and the shell keeps its directory and environment; all in one ${RUNNER === 'kube' ? 'Pod' : 'container'}, run after run.`,
);

/** SESSION is the query's override: a session that ends after 5 idle minutes (within the shipped ceilings). */
const SESSION = { idle_timeout: '5m' };
/** CRM_CALLS is the policy's code_calls: code may look customers up in crm, nothing else. */
const CRM_CALLS = { callable: { crm: ['lookup'] }, max_calls: 20, max_in_flight: 2 };

const bin = buildServer();
const crmCalls = join(mkdtempSync(join(tmpdir(), 'gatekeeper-wt9-calls-')), 'crm.jsonl');
const w = await startWorld({
  n: 9,
  policy: {
    image: 'python-data',
    timeout: '60s',
    netEnabled: false,
    mcpServers: { crm: { description: 'customer records (id, name, city)', command: [bin, '-name', 'crm', '-records', '100', '-calls-log', crmCalls] } },
    codeCalls: CRM_CALLS,
  },
  ui: true, // the console's stream, for gatekeeper tail
});
/** runs are the finished runs, by tool use id, as onSandboxRun got them (with the wire's session). */
const runs = new Map<string, SandboxRun>();

/** inSession checks that a run was run n of the query's one session, on the wire and in its audit line, and lost nothing. */
function inSession(o: Outcome, n: number): void {
  const s = runs.get(o.id)?.session;
  t.line('session', s === undefined ? '(none)' : `run ${String(s.run)} · age ${String(s.age_ms)} ms · idle ${String(s.idle_ms)} ms · restarts ${String(s.restarts)} · peak ${String(s.peak_memory_bytes)} B`);
  t.expect(s?.run === n, `run_result.session.run is ${String(n)}: the run's number in the query's session`, JSON.stringify(s));
  t.expect(o.run?.session_run === n, `the run's audit line carries session_run ${String(n)}`, JSON.stringify(o.run?.session_run));
  t.expect(o.sandbox?.state_lost === undefined && o.run?.state_lost === undefined, 'no state was lost', JSON.stringify(o.sandbox?.state_lost ?? o.run?.state_lost));
}

/** ranClean checks a run exited 0 with exactly the stdout want and nothing on stderr. */
function ranClean(o: Outcome, want: string, what: string): void {
  const r = expectRan(t, o);
  t.expect(r?.exit_code === 0 && r.reason === 'exited' && r.stdout === want, what, `exit ${String(r?.exit_code)} (${String(r?.reason)})\nstdout ${JSON.stringify(r?.stdout)}\nwant   ${JSON.stringify(want)}`);
  t.expect(r?.stderr === '', 'nothing on stderr (no NameError, no traceback)', clip(r?.stderr ?? '', 600));
}

const top = byCustomer().slice(0, TOP);
const steps: Step[] = [
  {
    say: 'the model sends the orders CSV in and loads it into a DataFrame, df, printing a summary',
    call: { name: RUN, input: { language: 'python', code: LOAD, files: { 'data/orders.csv': ordersCSV() } } },
    check: (o) => {
      ranClean(o, loadSummary(), `it printed ${JSON.stringify(loadSummary().trim())}`);
      inSession(o, 1);
    },
  },
  {
    say: 'next call: the model removes the CSV and ranks customers from df alone, ending in a bare expression',
    call: { name: RUN, input: { language: 'python', code: RANK } },
    check: (o) => {
      ranClean(o, rankShown(), `df was still there: the last expression's value is shown as a notebook shows it, ${rankShown().trim()}`);
      t.expect(!o.modelSaw.includes('NameError'), 'the model never read a NameError');
      inSession(o, 2);
    },
  },
  {
    say: 'a code-mode call in the middle: the model names the top customers through the crm MCP server, from the top it computed',
    call: { name: RUN, input: { language: 'python', code: NAMES } },
    check: (o) => {
      ranClean(o, namesPrinted(), `crm named the ${String(TOP)} customers the previous run ranked`);
      const calls = readAudit(w.auditLog).filter((r) => r.kind === 'code_call' && o.run?.run_id !== undefined && r.run_id === o.run.run_id);
      for (const c of calls) t.line('  call', `#${String(c.call_seq)} ${String(c.server)}.${String(c.tool)} → ${String(c.decision)} ${String(c.rule)}`);
      t.expect(
        calls.length === TOP && calls.every((c) => c.server === 'crm' && c.tool === 'lookup' && c.decision === 'allow' && c.rule === 'code_calls.callable' && c.error_kind === undefined),
        `${String(TOP)} nested lookups, each allowed by code_calls.callable and audited under this run`,
        JSON.stringify(calls.map((c) => [c.server, c.tool, c.decision, c.rule, c.error_kind])),
      );
      t.expect(o.run?.tool_calls === TOP, `the run's line counts its ${String(TOP)} nested calls`, `tool_calls ${String(o.run?.tool_calls)}`);
      const got = serverCalls(crmCalls).map((c) => c.arguments.id);
      t.expect(JSON.stringify(got) === JSON.stringify(top.map(([c]) => c)), `crm received the lookups of customers ${top.map(([c]) => c).join(', ')}, by its own log`, JSON.stringify(got));
      inSession(o, 3);
    },
  },
  {
    say: 'the model charts revenue per customer from by_customer and leaves the figure open (no savefig)',
    call: { name: RUN, input: { language: 'python', code: PLOT } },
    check: (o) => {
      ranClean(o, plotPrinted(), 'by_customer was still there');
      const pngs = (o.sandbox?.files ?? []).filter((f) => f.media_type === 'image/png');
      t.expect(pngs.length === 1 && pngs[0]?.change === 'created' && pngs[0].note === 'shown to you as an image', 'the open figure came back as one new image/png file, shown to the model', JSON.stringify(o.sandbox?.files));
      const png = runs.get(o.id)?.files.find((f) => f.path === pngs[0]?.path)?.content;
      const size = png === undefined ? undefined : pngSize(png);
      t.line('figure', `${String(pngs[0]?.path)}: ${size === undefined ? 'not a PNG' : `${String(size.width)}×${String(size.height)} PNG`}, ${String(png?.length ?? 0)} bytes`);
      t.expect(size !== undefined && size.width > 0 && size.height > 0, 'onSandboxRun got its bytes: a PNG');
      inSession(o, 4);
    },
  },
  {
    say: 'the shell: the model makes the report directory, cds into it and exports a tag',
    call: { name: RUN, input: { language: 'sh', code: SHELL_CD } },
    check: (o) => {
      ranClean(o, `in /workspace/${REPORT_DIR}\n`, `the shell is in /workspace/${REPORT_DIR}`);
      inSession(o, 5);
    },
  },
  {
    say: 'next call: the model relies on the directory and the variable',
    call: { name: RUN, input: { language: 'sh', code: SHELL_AFTER } },
    check: (o) => {
      ranClean(o, `/workspace/${REPORT_DIR}\ntag=${REPORT_TAG}\n`, `the shell's working directory and REPORT_TAG=${REPORT_TAG} persisted from the previous call`);
      inSession(o, 6);
    },
  },
];

try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}), image python-data, sandbox network off; mcp_servers crm (stdio: ${bin})`);
  t.line('query', `sandboxPolicy ${JSON.stringify({ session: SESSION })}: a session for this query; code_calls.callable ${JSON.stringify(CRM_CALLS.callable)}`);
  const agent = await runAgent(w, t, steps, {
    tag: '9',
    prompt: 'Explore our orders: load them, rank the top customers, name them, chart revenue per customer, and set up reports/2026.',
    sandboxPolicy: { session: SESSION },
    onSandboxRun: (run) => {
      runs.set(run.toolUseId, run);
    },
    timeoutMs: 300_000,
    finalText: (os) => `Top customers: ${(os[2]?.sandbox?.stdout ?? '?').trim().split('\n').join(', ')}. The chart is above.`,
  });
  const images = imagesReceived(agent.fake, agent.outcomes[3]?.id ?? '');
  t.expect(images.length === 1 && images[0]?.mediaType === 'image/png' && pngSize(images[0].data) !== undefined, 'the fake model received the figure as an image block in the tool_result', JSON.stringify(images.map((i) => ({ mediaType: i.mediaType, bytes: i.data.length }))));

  t.section('one session for the six runs');
  const sessions = agent.outcomes.map((o) => runs.get(o.id)?.session);
  t.expect(
    sessions.length === steps.length && sessions.every((s, i) => s?.run === i + 1 && s.restarts === 0 && s.started_at !== undefined && s.started_at === sessions[0]?.started_at),
    'runs 1 to 6 of one session: the same start, no restart',
    JSON.stringify(sessions),
  );
  t.expect(sessions.every((s, i) => i === 0 || (s?.age_ms ?? -1) >= (sessions[i - 1]?.age_ms ?? 0)), 'the session grew older from run to run', JSON.stringify(sessions.map((s) => s?.age_ms)));

  t.section('the session in the audit log');
  let lines: AuditRecord[] = [];
  for (const deadline = Date.now() + 15_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 100))) {
    lines = readAudit(w.auditLog).filter((r) => r.kind === 'session');
    if (lines.some((r) => r.event === 'session_end')) break;
  }
  for (const l of lines) t.line('audit', `${String(l.event).padEnd(13)} session ${String(l.session_id)} sandbox ${clip(String(l.sandbox), 24)} revision ${clip(String(l.revision), 16)}${l.event === 'session_end' ? ` · ${String(l.reason)} after ${String(l.runs)} runs` : ''}`);
  const starts = lines.filter((r) => r.event === 'session_start');
  const ends = lines.filter((r) => r.event === 'session_end');
  const queryId = agent.outcomes[0]?.run?.query_id;
  t.expect(starts.length === 1 && starts[0]?.query_id === queryId && (starts[0].session_id ?? '') !== '' && (starts[0].sandbox ?? '') !== '', 'one session started, for the query, with its sandbox', JSON.stringify(starts));
  t.expect(
    ends.length === 1 && ends[0]?.reason === 'closed' && ends[0].runs === steps.length && ends[0].session_id === starts[0]?.session_id && ends[0].sandbox === starts[0]?.sandbox,
    `it ended when the query closed (reason closed), after its ${String(steps.length)} runs`,
    JSON.stringify(ends),
  );
  const sessionId = starts[0]?.session_id;
  t.expect(
    queryId !== undefined && sessionId !== undefined && agent.outcomes.length === steps.length && agent.outcomes.every((o) => o.run?.query_id === queryId && o.run.session_id === sessionId),
    "every run line is the query's, in that session",
    JSON.stringify(agent.outcomes.map((o) => [o.run?.query_id, o.run?.session_id])),
  );

  t.section('gatekeeper tail: the session\'s start and end');
  const tail = execFileSync(GATEKEEPER_BIN, ['tail', '--url', w.url, '--token-file', w.tokenFile, '--no-follow', '--backfill', '200', '--kind', 'session', '--color', 'never'], { encoding: 'utf8' });
  const shown = tail.split('\n').filter((l) => l.trim() !== '');
  for (const l of shown) t.line('tail', clip(l, 150));
  const named = (l: string | undefined): boolean => sessionId !== undefined && (l ?? '').includes(`session ${sessionId}`);
  t.expect(
    shown.length === 2 && /session_start/.test(shown[0] ?? '') && named(shown[0]) && (shown[1] ?? '').includes(`ended: closed · ${String(steps.length)} runs`) && named(shown[1]),
    `gatekeeper tail --kind session shows the session starting, then ending (closed, ${String(steps.length)} runs)`,
    clip(tail, 2000),
  );

  t.section('the audit log');
  const v = verifyAudit(w.auditLog);
  t.expect(v.code === 0, 'gatekeeper audit verify: the chain, session lines included, is intact', v.lines.join('\n'));
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
}
process.exit(t.finish());
