// End to end: the real Agent SDK, the real sidecar with the real engine
// and the loopback fake model. The policy asks before two tools of the
// caller's in-process server; the model's program calls both. Each ask
// reaches the caller's canUseTool with the tool's MCP name, its arguments
// and which run and program asked (options.nestedCall): it allows one
// call, which runs the tool's handler, and denies the other, which raises
// in the program with the handler's message. Both answers are on the
// calls' code_call lines. A query without canUseTool has no one to ask:
// the call is denied without waiting, and its line says no_handler.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSdkMcpServer, tool, type CanUseTool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import type { NestedCall } from '@gatekeeper/client';
import { readAudit } from './helpers/sidecar.js';
import { agent, closeWorld, only, world } from './helpers/world.js';

const RUN = 'mcp__sandboxed_code__run';

function notesServer(handled: string[]) {
  const search = tool('search', 'Search the notes for a phrase.', { q: z.string() }, async ({ q }) => {
    handled.push(`search ${q}`);
    return { content: [{ type: 'text' as const, text: `2 notes match ${q}` }] };
  });
  const remove = tool('remove', 'Removes one note.', { id: z.string() }, async ({ id }) => {
    handled.push(`remove ${id}`);
    return { content: [{ type: 'text' as const, text: 'removed' }] };
  });
  return createSdkMcpServer({ name: 'notes', tools: [search, remove] });
}

const POLICY = {
  ask: ['mcp__notes__search', 'mcp__notes__remove'],
  extra: 'code_calls:\n  callable:\n    notes: [search, remove]\n  timeout: 20s\n',
};

const CODE = [
  'import gatekeeper_tools as gt',
  'import gatekeeper_tools.notes as notes',
  "print('found:', notes.search(q='gvisor'))",
  'try:',
  "    notes.remove(id='n1')",
  'except gt.ToolCallError as e:',
  "    print('refused:', e.kind, e.rule, str(e))",
].join('\n');

test('an ask on a call from code reaches canUseTool, which allows one call and denies another', async () => {
  const handled: string[] = [];
  const asked: { toolName: string; input: Record<string, unknown>; toolUseID: string; nested: NestedCall }[] = [];
  const canUseTool: CanUseTool = async (toolName, input, options) => {
    const nested = (options as { nestedCall?: NestedCall }).nestedCall;
    if (nested === undefined) return { behavior: 'allow', updatedInput: input };
    asked.push({ toolName, input, toolUseID: options.toolUseID, nested });
    if (toolName === 'mcp__notes__search') return { behavior: 'allow', updatedInput: input };
    return { behavior: 'deny', message: 'not without a backup' };
  };
  const w = await world(POLICY);
  try {
    const { box } = await agent(w, [{ type: 'tool_use', name: RUN, input: { language: 'python', code: CODE }, id: 'toolu_code' }, { type: 'text', text: 'done' }], {
      mcpServers: { notes: notesServer(handled) },
      canUseTool,
    });
    const r = only(box, 'toolu_code');
    assert.equal(r.is_error, false, r.text);
    assert.match(r.text, /found: 2 notes match gvisor/);
    assert.match(r.text, /refused: denied tools\.ask_list .*the user denied this call from code: not without a backup/);
    assert.deepEqual(handled, ['search gvisor'], 'the handler ran for the allowed call only');
    assert.deepEqual(
      asked.map((a) => [a.toolName, a.input, a.toolUseID, a.nested.toolUseId, a.nested.language, a.nested.server, a.nested.tool, a.nested.callSeq, a.nested.rule]),
      [
        ['mcp__notes__search', { q: 'gvisor' }, 'toolu_code', 'toolu_code', 'python', 'notes', 'search', 1, 'tools.ask_list'],
        ['mcp__notes__remove', { id: 'n1' }, 'toolu_code', 'toolu_code', 'python', 'notes', 'remove', 2, 'tools.ask_list'],
      ],
    );
    const lines = readAudit(w.sidecar.auditLog).filter((l) => l.kind === 'code_call');
    const run = readAudit(w.sidecar.auditLog).find((l) => l.kind === 'run');
    assert.ok(run !== undefined && asked.every((a) => a.nested.runId === run.run_id), 'nestedCall.runId is the run of the audit log');
    assert.deepEqual(
      lines.map((l) => {
        const a = l.approval;
        return [l.tool, l.decision, l.rule, a?.by, a?.decision, a?.message ?? ''];
      }),
      [
        ['search', 'allow', 'tools.ask_list', 'client', 'allow', ''],
        ['remove', 'deny', 'tools.ask_list', 'client', 'deny', 'not without a backup'],
      ],
    );
    for (const l of lines) {
      const a = l.approval;
      assert.ok(a !== undefined && typeof a.wait_ms === 'number' && Date.parse(a.answered_at) >= Date.parse(a.asked_at), 'answered after asked');
    }
  } finally {
    await closeWorld(w);
  }
});

test('without canUseTool an ask on a call from code is denied at once, saying no one can approve it', async () => {
  const handled: string[] = [];
  const w = await world(POLICY);
  try {
    const code = ['import gatekeeper_tools as gt', 'import gatekeeper_tools.notes as notes', 'try:', "    notes.search(q='x')", 'except gt.ToolCallError as e:', "    print('refused:', e.kind, str(e))"].join('\n');
    const { box } = await agent(w, [{ type: 'tool_use', name: RUN, input: { language: 'python', code }, id: 'toolu_code' }, { type: 'text', text: 'done' }], {
      mcpServers: { notes: notesServer(handled) },
    });
    const r = only(box, 'toolu_code');
    assert.match(r.text, /refused: denied .*no one can approve a call from this run's code .*call mcp__notes__search directly/);
    assert.deepEqual(handled, []);
    const lines = readAudit(w.sidecar.auditLog).filter((l) => l.kind === 'code_call');
    assert.deepEqual(
      lines.map((l) => [l.tool, l.decision, l.approval?.by]),
      [['search', 'deny', 'no_handler']],
    );
  } finally {
    await closeWorld(w);
  }
});
