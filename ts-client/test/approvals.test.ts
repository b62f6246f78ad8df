// Asks on calls from code as this client answers them: the frames pinned
// to gate/wire/testdata/approvals.json (the Go codec decodes and encodes
// the same bytes), and the relay over a socket to the caller's canUseTool:
// answered on its connection, aborted when the sidecar stops waiting,
// denied for another query, and an allow that rewrites the arguments, a
// null and a throw are denies.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { CanUseTool } from '@anthropic-ai/claude-agent-sdk';
import { canUseToolApprover, type NestedCall } from '../src/approvals.js';
import { resolveConfig } from '../src/config.js';
import { Connection } from '../src/connection.js';
import { parseReply, type ApprovalRequestReply } from '../src/protocol.js';
import { SidecarQuery } from '../src/session.js';
import { startFakeSidecar, type Frame } from './helpers/fake-sidecar.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const shared = JSON.parse(readFileSync(join(REPO, 'gate/wire/testdata/approvals.json'), 'utf8')) as Record<string, Record<string, unknown>>;
const ASK = shared.approval_request as unknown as ApprovalRequestReply;

async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('the sidecar\'s ask frames of the shared file parse', () => {
  for (const name of ['approval_request', 'approval_cancel']) assert.doesNotThrow(() => parseReply(JSON.stringify(shared[name])), name);
  assert.throws(() => parseReply(JSON.stringify({ ...shared.approval_request, tool_name: undefined })), /lacks tool_name/);
});

test('canUseTool gets the MCP name, a copy of the arguments and which run and program asked', async () => {
  let seen: { toolName: string; input: Record<string, unknown>; options: Parameters<CanUseTool>[2] & { nestedCall?: NestedCall } } | undefined;
  const approve = canUseToolApprover(async (toolName, input, options) => {
    seen = { toolName, input, options };
    input.customer_id = 'changed in place';
    return { behavior: 'allow', updatedInput: { customer_id: 'c-1' } };
  });
  assert.deepEqual(await approve(ASK, new AbortController().signal), { decision: 'allow' });
  assert.equal(seen?.toolName, 'mcp__crm__delete_customer');
  assert.equal(ASK.arguments.customer_id, 'c-1', 'the handler got a copy');
  assert.equal(seen?.options.toolUseID, 'toolu_02');
  assert.equal(seen?.options.requestId, 'a_1');
  assert.equal(seen?.options.decisionReason, ASK.reason);
  assert.deepEqual(seen?.options.mcpServer, { name: 'crm', source: 'gatekeeper' });
  assert.deepEqual(seen?.options.nestedCall, {
    runId: 'r_9a1f', toolUseId: 'toolu_02', language: 'python', server: 'crm', tool: 'delete_customer', callSeq: 3, rule: 'tools.ask_list', reason: ASK.reason,
  });
});

test('a deny, an allow that rewrites the arguments, null and a throw are denies with a reason', async () => {
  const cases: [string, CanUseTool, RegExp][] = [
    ['deny', async () => ({ behavior: 'deny', message: 'not the EU ones' }), /^not the EU ones$/],
    ['rewrite', async () => ({ behavior: 'allow', updatedInput: { customer_id: 'c-2' } }), /changed the arguments of a call from code/],
    ['null', async () => null, /out of band/],
    ['throw', async () => {
      throw new Error('UI closed');
    }, /threw: UI closed/],
  ];
  for (const [name, handler, want] of cases) {
    const a = await canUseToolApprover(handler)(ASK, new AbortController().signal);
    assert.equal(a.decision, 'deny', name);
    assert.match(a.message ?? '', want, name);
  }
});

test('an ask is answered on its connection, a cancelled one aborts the handler and is not answered, another query\'s is denied', async () => {
  const fake = await startFakeSidecar();
  const conn = new Connection(resolveConfig({ url: fake.url, token: fake.token }, {}));
  let aborted = false;
  const sq = new SidecarQuery(conn, undefined, undefined, canUseToolApprover(async (_name, input, options) => {
    if (input.customer_id === 'slow') {
      await new Promise<void>((r) => options.signal.addEventListener('abort', () => r(), { once: true }));
      aborted = true;
      return { behavior: 'allow', updatedInput: input };
    }
    return { behavior: 'deny', message: 'no' };
  }));
  try {
    await sq.firstOpen(2000);
    assert.equal(fake.frames.find((f) => f.type === 'open_query')?.approvals, true, 'open_query declares approvals');
    const q = fake.queryIds[0];
    const answers = (): Frame[] => fake.frames.filter((f) => f.type === 'approval');
    fake.push({ ...shared.approval_request, id: 'a_slow', query_id: q, arguments: { customer_id: 'slow' } });
    fake.push({ ...shared.approval_request, query_id: q });
    await until(() => answers().length === 1, 'the answer');
    assert.deepEqual(answers()[0], { type: 'approval', id: 'a_1', decision: 'deny', message: 'no' });
    fake.push({ type: 'approval_cancel', id: 'a_slow', query_id: q });
    await until(() => aborted, 'the handler to be aborted');
    fake.push({ ...shared.approval_request, id: 'a_other', query_id: 'q_other' });
    await until(() => answers().length === 2, 'the refusal');
    assert.deepEqual(answers().map((f) => [f.id, f.decision]), [['a_1', 'deny'], ['a_other', 'deny']], 'nothing for the cancelled ask');
  } finally {
    await sq.close();
    conn.close();
    await fake.close();
  }
});

test('a query without a handler declares none, and an ask that comes anyway is denied', async () => {
  const fake = await startFakeSidecar();
  const conn = new Connection(resolveConfig({ url: fake.url, token: fake.token }, {}));
  const sq = new SidecarQuery(conn, undefined);
  try {
    await sq.firstOpen(2000);
    assert.equal(fake.frames.find((f) => f.type === 'open_query')?.approvals, undefined);
    fake.push({ ...shared.approval_request, query_id: fake.queryIds[0] });
    await until(() => fake.frames.some((f) => f.type === 'approval'), 'the refusal');
    assert.deepEqual(fake.frames.find((f) => f.type === 'approval'), { type: 'approval', id: 'a_1', decision: 'deny', message: 'this client has no handler for asks' });
  } finally {
    await sq.close();
    conn.close();
    await fake.close();
  }
});
