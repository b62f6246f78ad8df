// The caller's in-process MCP servers as sandboxed code calls them: the
// declaration of a real createSdkMcpServer server and the frames of a
// relayed call, pinned to gate/wire/testdata/sdk-tools.json (the Go codec
// decodes and encodes the same bytes), and the relay over a socket:
// answered with the tool's own handler, cancelled, refused for another
// query.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { resolveConfig } from '../src/config.js';
import { Connection } from '../src/connection.js';
import { parseReply } from '../src/protocol.js';
import { SdkTools } from '../src/sdk-tools.js';
import { SidecarQuery } from '../src/session.js';
import { startFakeSidecar, type Frame } from './helpers/fake-sidecar.js';

const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');
const shared = JSON.parse(readFileSync(join(REPO, 'gate/wire/testdata/sdk-tools.json'), 'utf8')) as Record<string, Record<string, unknown>>;
const quiet = {};

/** notesServer is the in-process server of the shared file, with a slow tool beside it when asked. */
function notesServer(slow?: { started: () => void; aborted: () => void }) {
  const search = tool('search', 'Search the notes for a phrase.', { q: z.string() }, async ({ q }) => ({ content: [{ type: 'text' as const, text: `2 notes match ${q}` }] }), {
    annotations: { readOnlyHint: true, openWorldHint: false },
  });
  const tools = [search];
  if (slow) {
    tools.push(
      tool('wait', 'Waits until cancelled.', {}, async (_args, extra) => {
        slow.started();
        const signal = (extra as { signal: AbortSignal }).signal;
        await new Promise<void>((r) => signal.addEventListener('abort', () => r(), { once: true }));
        slow.aborted();
        return { content: [{ type: 'text' as const, text: 'too late' }] };
      }) as unknown as typeof search,
    );
  }
  return createSdkMcpServer({ name: 'notes', instructions: "the team's notes", tools });
}

test('a real in-process server is declared as the shared open_query has it', async () => {
  const tools = await SdkTools.declare({ notes: notesServer() }, quiet);
  const frame = { type: 'open_query', id: '2', sdk_servers: tools.declared };
  assert.equal(JSON.stringify(frame), JSON.stringify(shared.open_query));
});

test('a server the sidecar could not take is left out, not sent, with a warning naming it', async () => {
  const warned: unknown[] = [];
  const info: unknown[] = [];
  const logger = { warn: (m: string, f?: Record<string, unknown>) => warned.push({ m, ...f }), info: (m: string) => info.push(m) };
  const tools = await SdkTools.declare({ 'My-Notes': notesServer(), sandboxed_code: notesServer(), remote: { type: 'http', url: 'http://127.0.0.1:1/mcp' } }, logger);
  assert.deepEqual(tools.declared, []);
  assert.deepEqual(warned, [
    {
      m: 'gatekeeper: an in-process MCP server is not callable from sandboxed code',
      server: 'My-Notes',
      why: 'its name is not a lower-case name of at most 32 letters, digits and _ starting with a letter',
    },
  ]);
  assert.deepEqual(info, []);
});

test('a declared tool runs with its own handler; an undeclared one and bad arguments fail', async () => {
  const tools = await SdkTools.declare({ notes: notesServer() }, quiet);
  const signal = new AbortController().signal;
  assert.deepEqual(await tools.call('notes', 'search', { q: 'gvisor' }, signal, 't_1'), shared.tool_result?.result);
  await assert.rejects(tools.call('notes', 'drop', {}, signal, 't_2'), (err: Error) => err.message === shared.tool_result_error?.error);
  const bad = await tools.call('notes', 'search', { q: 7 }, signal, 't_3');
  assert.equal(bad.isError, true, 'the MCP server\'s own input validation answers');
  assert.match(JSON.stringify(bad.content), /Invalid arguments for tool search/);
});

test('the sidecar\'s frames of the shared file parse', () => {
  for (const name of ['tool_call', 'tool_cancel']) assert.doesNotThrow(() => parseReply(JSON.stringify(shared[name])), name);
  assert.throws(() => parseReply(JSON.stringify({ ...shared.tool_call, arguments: [] })), /arguments of the wrong type/);
});

/** until polls cond (the frames arrive over a socket). */
async function until(cond: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 10_000;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 5));
  }
}

test('a relayed call is answered on its connection; a cancelled one is stopped and not answered; another query\'s is refused', async () => {
  const fake = await startFakeSidecar();
  let started = false;
  let aborted!: () => void;
  const abortedP = new Promise<void>((r) => (aborted = r));
  const conn = new Connection(resolveConfig({ url: fake.url, token: fake.token }, {}));
  const tools = await SdkTools.declare({ notes: notesServer({ started: () => (started = true), aborted }) }, quiet);
  const sq = new SidecarQuery(conn, undefined, tools);
  try {
    await sq.firstOpen(2000);
    const q = fake.queryIds[0];
    assert.ok(q);
    const results = (): Frame[] => fake.frames.filter((f) => f.type === 'tool_result');
    fake.push({ ...shared.tool_call, query_id: q });
    await until(() => results().length === 1, 'the answer');
    assert.deepEqual(results()[0], shared.tool_result);

    fake.push({ type: 'tool_call', id: 't_wait', query_id: q, server: 'notes', tool: 'wait', arguments: {}, timeout_ms: 60_000 });
    await until(() => started, 'the slow tool to start');
    fake.push({ type: 'tool_cancel', id: 't_wait', query_id: q });
    await abortedP;
    fake.push({ type: 'tool_call', id: 't_other', query_id: 'q_other', server: 'notes', tool: 'search', arguments: { q: 'x' }, timeout_ms: 1000 });
    await until(() => results().length === 2, 'the refusal');
    // Frames come in order on one socket: the refusal of t_other came after
    // anything t_wait's handler could have sent once aborted.
    assert.deepEqual(results().map((f) => f.id), ['t_1', 't_other']);
    assert.match(String(results()[1]?.error), /declared no in-process tools/);
  } finally {
    await sq.close();
    conn.close();
    await fake.close();
  }
});

test('a connection whose query declared no tools refuses a tool_call', async () => {
  const fake = await startFakeSidecar();
  const conn = new Connection(resolveConfig({ url: fake.url, token: fake.token }, {}));
  const sq = new SidecarQuery(conn, undefined);
  try {
    await sq.firstOpen(2000);
    assert.equal(fake.frames.find((f) => f.type === 'open_query')?.sdk_servers, undefined, 'no declaration, no sdk_servers field');
    fake.push({ ...shared.tool_call, query_id: fake.queryIds[0] });
    await until(() => fake.frames.some((f) => f.type === 'tool_result'), 'the refusal');
    assert.deepEqual(fake.frames.find((f) => f.type === 'tool_result'), { type: 'tool_result', id: 't_1', error: 'this client declared no in-process tools' });
  } finally {
    await sq.close();
    conn.close();
    await fake.close();
  }
});
