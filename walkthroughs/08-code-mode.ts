// Walkthrough 8: code mode. The operator's policy names two MCP servers
// (the Go SDK test servers: crm over stdio, billing over streamable HTTP)
// and which of their tools code may call. Instead of ten tool calls whose
// results would all enter its context, the model writes one Python program
// that pages through 500 customers, joins them with 500 invoices, writes a
// CSV for the agent and prints three lines. Every nested call is decided
// by the policy and written to the audit log under its run; a call the
// policy denies raises in the program, naming the rule, and reaches no
// server: each server logs every call it receives (-calls-log), and the
// walkthrough reads what they got.

import { execFileSync } from 'node:child_process';
import { gunzipSync } from 'node:zlib';
import type { SandboxRun } from '@gatekeeper/client';
import { expectRan, runAgent, RUN, type Outcome } from './lib/agent.js';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { buildServer, CODE_CALLS, DENIED_PROGRAM, joinCSV, joinSummary, JOIN_PROGRAM, mcpServers, OPS_REGO, serverCalls, startHTTPServer, VIP } from './lib/codemode.js';
import { clip, Transcript } from './lib/transcript.js';
import { GATEKEEPER_BIN, readAudit, RUNNER, startWorld, verifyAudit, type AuditRecord, type World } from './lib/world.js';

const t = new Transcript(8, 'Code mode');
t.header(
  'The policy names two MCP servers (Go SDK: crm over stdio, billing over streamable HTTP) and the tools code may call.',
  `The scripted model writes ONE Python program instead of ten tool calls; it runs in ${RUNNER === 'kube' ? 'a Kubernetes Pod' : 'Docker'} with no network,`,
  'and each of its calls reaches the servers through the sidecar, decided by Rego and audited under the run.',
);

/** codeCalls are the audit's code_call lines of one run, in order. */
function codeCalls(w: World, o: Outcome): AuditRecord[] {
  const run = o.run?.run_id;
  return readAudit(w.auditLog).filter((r) => r.kind === 'code_call' && run !== undefined && r.run_id === run);
}

/** showCalls prints a run's nested calls as the gate decided them. */
function showCalls(calls: AuditRecord[]): void {
  for (const c of calls) {
    const err = c.error_kind !== undefined ? `  (${c.error_kind}: ${clip(c.error ?? c.reason ?? '', 70)})` : '';
    t.line('  call', `#${String(c.call_seq).padEnd(2)} ${`${String(c.server)}.${String(c.tool)}`.padEnd(18)} → ${String(c.decision || '-').padEnd(5)} ${String(c.rule).padEnd(26)} args ${String(c.arguments_bytes)} B, result ${String(c.result_bytes ?? 0)} B, ${String(c.duration_ms ?? 0)} ms${err}`);
  }
}

const RECORD_NAME = /\b(crm|billing)-\d+\b/;
const bin = buildServer();
const logs = mkdtempSync(join(tmpdir(), 'gatekeeper-wt8-calls-'));
const crmCalls = join(logs, 'crm.jsonl');
const billingCalls = join(logs, 'billing.jsonl');
const billing = await startHTTPServer(bin, 'billing', undefined, billingCalls);
const w = await startWorld({
  n: 8,
  policy: { mcpServers: mcpServers(bin, billing.url, crmCalls), codeCalls: CODE_CALLS, netEnabled: false },
  rego: { 'ops.rego': OPS_REGO },
  ui: true, // the console's stream, for gatekeeper tail
});
const runs = new Map<string, SandboxRun>();
try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}), sandbox network off; mcp_servers crm (stdio: ${bin}) and billing (${billing.url})`);
  t.line('policy', `code_calls.callable ${JSON.stringify(CODE_CALLS.callable)}; operator Rego ops.vip_invoice denies billing id ${String(VIP)} from code`);
  const expectedSummary = joinSummary();
  await runAgent(w, t, [
    {
      say: 'the model writes one program: page 500 customers (crm) and 500 invoices (billing), join, write a CSV, print three lines',
      call: { name: RUN, input: { language: 'python', code: JOIN_PROGRAM } },
      check: (o, t) => {
        const calls = codeCalls(w, o);
        showCalls(calls);
        const r = expectRan(t, o);
        t.expect(r?.exit_code === 0 && r.stdout === expectedSummary, 'the program printed the three-line summary the records add up to', JSON.stringify(r));
        t.expect(
          calls.length === 10 && calls.every((c) => c.decision === 'allow' && c.rule === 'code_calls.callable' && c.tool === 'records' && c.error_kind === undefined && (c.result_bytes ?? 0) > 0),
          'ten nested calls (five pages from each server), each allowed by code_calls.callable, each with its result',
          JSON.stringify(calls.map((c) => [c.server, c.tool, c.decision, c.rule, c.error_kind])),
        );
        t.expect(calls.filter((c) => c.server === 'crm').length === 5 && calls.filter((c) => c.server === 'billing').length === 5, 'five to crm over stdio, five to billing over HTTP');
        t.expect(calls.length > 0 && calls.every((c, i) => c.call_seq === i + 1 && /^[0-9a-f]{64}$/.test(c.arguments_sha256 ?? '') && /^[0-9a-f]{64}$/.test(c.result_sha256 ?? '')), 'each line has its number in the run and the sha256 of its arguments and result');
        t.expect(o.run?.tool_calls === 10, "the run's line counts its ten nested calls", `tool_calls ${String(o.run?.tool_calls)}`);
        const csv = r?.files?.find((f) => f.path === 'out/joined.csv.gz');
        t.expect(csv !== undefined && csv.change === 'created' && csv.text === undefined, 'the CSV is returned, listed for the model without its content', JSON.stringify(r?.files));
        const got = [...runs.values()].find((x) => x.toolUseId === o.id)?.files.find((f) => f.path === 'out/joined.csv.gz')?.content;
        const text = got !== undefined ? gunzipSync(got).toString('utf8') : '';
        t.expect(text === joinCSV(), 'the agent got the CSV: 500 joined rows, each as the two servers hold it', clip(text, 200));
        const tr = o.result?.text ?? '';
        t.line('model ←', `${String(Buffer.byteLength(tr))} bytes of tool result (vs ${String(calls.reduce((n, c) => n + (c.result_bytes ?? 0), 0))} bytes of MCP results the program read)`);
        t.expect(!RECORD_NAME.test(o.modelSaw) && expectedSummary.split('\n').filter((l) => l !== '').every((l) => o.modelSaw.includes(l)), "the model's requests carry the three lines and not one of the 1,000 records", clip(RECORD_NAME.exec(o.modelSaw)?.[0] ?? '', 80));
      },
    },
    {
      say: 'the model tries what the policy refuses: a tool no callable glob names, and the VIP invoice',
      call: { name: RUN, input: { language: 'python', code: DENIED_PROGRAM } },
      check: (o, t) => {
        const calls = codeCalls(w, o);
        showCalls(calls);
        const r = o.sandbox;
        t.expect(r?.stdout === 'delete_record: denied by code_calls.not_callable\nbilling-12\n', 'crm.delete_record raised ToolCallDenied naming code_calls.not_callable; the lookup of id 12 went through', JSON.stringify(r?.stdout));
        t.expect(r?.exit_code === 1 && /ToolCallDenied/.test(r.stderr) && r.stderr.includes('ops.vip_invoice'), `the VIP lookup raised ToolCallDenied in the program, naming ops.vip_invoice`, clip(r?.stderr ?? '', 300));
        const want = [
          ['crm', 'delete_record', 'deny', 'code_calls.not_callable'],
          ['billing', 'lookup', 'allow', 'code_calls.callable'],
          ['billing', 'lookup', 'deny', 'ops.vip_invoice'],
        ];
        t.expect(JSON.stringify(calls.map((c) => [c.server, c.tool, c.decision, c.rule])) === JSON.stringify(want), 'three code_call lines: the two denies with their rules, the allowed lookup between them', JSON.stringify(calls.map((c) => [c.server, c.tool, c.decision, c.rule])));
        t.expect(calls.some((c) => c.decision === 'deny') && calls.filter((c) => c.decision === 'deny').every((c) => c.error_kind === 'denied' && c.result_sha256 === undefined), 'a denied call got no result: none on its line');
        const crmGot = serverCalls(crmCalls);
        const billingGot = serverCalls(billingCalls);
        t.line('servers', `crm received ${String(crmGot.length)} calls (${[...new Set(crmGot.map((c) => c.tool))].join(', ')}); billing received ${String(billingGot.length)} (lookups of ${billingGot.filter((c) => c.tool === 'lookup').map((c) => JSON.stringify(c.arguments)).join(', ')})`);
        t.expect(crmGot.length > 0 && !crmGot.some((c) => c.tool === 'delete_record'), 'a denied call reached no server, by its own log: crm never received delete_record', JSON.stringify(crmGot.map((c) => c.tool)));
        const lookups = billingGot.filter((c) => c.tool === 'lookup').map((c) => c.arguments.id);
        t.expect(JSON.stringify(lookups) === JSON.stringify([VIP - 1]), `billing received the lookup of ${String(VIP - 1)} and not that of ${String(VIP)}, by its own log`, JSON.stringify(lookups));
        const allowed = (server: string): number => readAudit(w.auditLog).filter((r) => r.kind === 'code_call' && r.server === server && r.decision === 'allow').length;
        t.expect(crmGot.length === allowed('crm') && billingGot.length === allowed('billing'), "each server received exactly the calls the audit log allowed it, no more", `crm ${String(crmGot.length)}/${String(allowed('crm'))}, billing ${String(billingGot.length)}/${String(allowed('billing'))}`);
        t.expect(o.run?.tool_calls === 3, "the run's line counts three nested calls", `tool_calls ${String(o.run?.tool_calls)}`);
      },
    },
  ], {
    tag: '8',
    prompt: 'Join our 500 customers with their invoices, give me the CSV and a short summary.',
    onSandboxRun: (run) => {
      runs.set(run.runId, run);
    },
    finalText: (os) => `Done: ${os[0]?.sandbox?.stdout.split('\n')[0] ?? '?'}. The CSV is out/joined.csv.gz. Invoice ${String(VIP)} is off limits to code.`,
  });

  t.section('gatekeeper tail: the nested calls under their runs, as the console shows them');
  const tail = execFileSync(GATEKEEPER_BIN, ['tail', '--url', w.url, '--token-file', w.tokenFile, '--no-follow', '--backfill', '100', '--kind', 'run', '--kind', 'code_call', '--color', 'never'], { encoding: 'utf8' });
  for (const l of tail.split('\n').filter((l) => l !== '')) t.line('tail', clip(l, 150));
  const tailCalls = tail.split('\n').filter((l) => /\b(crm|billing)\b/.test(l) && /\b(records|lookup|delete_record)\b/.test(l));
  t.expect(tailCalls.length === 13, 'gatekeeper tail shows the 13 nested calls', `${String(tailCalls.length)} lines`);

  t.section('the audit log');
  const v = verifyAudit(w.auditLog);
  t.expect(v.code === 0, 'gatekeeper audit verify: the chain, nested calls included, is intact', v.lines.join('\n'));
  const all = readAudit(w.auditLog);
  const nested = all.filter((r) => r.kind === 'code_call');
  const counted = all.filter((r) => r.kind === 'run').reduce((n, r) => n + (r.tool_calls ?? 0), 0);
  t.expect(nested.length === 13 && counted === 13, 'one code_call line per nested call: 13 lines, as the runs count them', `${String(nested.length)} lines, runs count ${String(counted)}`);
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
  billing.stop();
}
process.exit(t.finish());
