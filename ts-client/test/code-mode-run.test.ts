// End to end: the real Agent SDK, the real sidecar with the real engine
// (the run loop carries a program's calls through the bridge), and the
// loopback fake model. The model's program calls the caller's in-process
// tool notes.search through the wrappers; the sidecar decides the call, relays it to this client,
// which runs the tool's own handler; the program prints the result. A
// call to notes.drop, which code_calls.callable does not name, raises in
// the program with the rule and never reaches the handler. Both calls have
// code_call audit lines under the run, with source sdk seen by the policy.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { readAudit } from './helpers/sidecar.js';
import { agent, closeWorld, only, world } from './helpers/world.js';

const RUN = 'mcp__sandboxed_code__run';

test('a program calls the caller\'s in-process tool through the gate; a tool code may not call raises with its rule', async () => {
  const handled: string[] = [];
  const search = tool('search', 'Search the notes for a phrase.', { q: z.string() }, async ({ q }) => {
    handled.push(`search ${q}`);
    return { content: [{ type: 'text' as const, text: `2 notes match ${q}` }] };
  }, { annotations: { readOnlyHint: true } });
  const drop = tool('drop', 'Deletes every note.', {}, async () => {
    handled.push('drop');
    return { content: [{ type: 'text' as const, text: 'dropped' }] };
  });
  const notes = createSdkMcpServer({ name: 'notes', instructions: "the team's notes", tools: [search, drop] });
  const w = await world({ extra: 'code_calls:\n  callable:\n    notes: [search]\n' });
  try {
    const code = [
      'import gatekeeper_tools as gt',
      'import gatekeeper_tools.notes as notes',
      "print('found:', notes.search(q='gvisor'))",
      'try:',
      "    gt.call('notes', 'drop', {})",
      'except gt.ToolCallError as e:',
      "    print('refused:', e.kind, e.rule)",
    ].join('\n');
    const { box } = await agent(w, [{ type: 'tool_use', name: RUN, input: { language: 'python', code }, id: 'toolu_code' }, { type: 'text', text: 'done' }], {
      mcpServers: { notes },
    });
    const r = only(box, 'toolu_code');
    assert.equal(r.is_error, false, r.text);
    assert.match(r.text, /found: 2 notes match gvisor/);
    assert.match(r.text, /refused: denied code_calls\.not_callable/);
    assert.deepEqual(handled, ['search gvisor'], 'the handler ran for the callable tool only');
    const lines = readAudit(w.sidecar.auditLog).filter((l) => l.kind === 'code_call');
    assert.deepEqual(
      lines.map((l) => [l.server, l.tool, l.decision, l.rule]),
      [
        ['notes', 'search', 'allow', 'code_calls.callable'],
        ['notes', 'drop', 'deny', 'code_calls.not_callable'],
      ],
    );
  } finally {
    await closeWorld(w);
  }
});
