// Code mode with the caller's in-process tools, through the real Agent SDK,
// the real sidecar and the loopback fake model: the run tool's description
// the model reads names the servers its code may call (progressive
// discovery: servers and how to find their tools, not their schemas), and
// is today's text byte for byte when it may call none.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { createSdkMcpServer, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { SANDBOX_DESCRIPTION } from '../src/sandboxed-code.js';
import type { Sandbox } from './helpers/agent.js';
import { agent, closeWorld, world } from './helpers/world.js';

const RUN = 'mcp__sandboxed_code__run';

/** notes is the caller's in-process server of these tests. */
export function notes(): ReturnType<typeof createSdkMcpServer> {
  const search = tool('search', 'Search the notes for a phrase.', { q: z.string() }, async ({ q }) => ({ content: [{ type: 'text' as const, text: `2 notes match ${q}` }] }), {
    annotations: { readOnlyHint: true },
  });
  const drop = tool('drop', 'Deletes every note.', {}, async () => ({ content: [{ type: 'text' as const, text: 'dropped' }] }));
  return createSdkMcpServer({ name: 'notes', instructions: "the team's notes", tools: [search, drop] });
}

/** CALLABLE lets code call notes.search, and nothing else. */
export const CALLABLE = 'code_calls:\n  callable:\n    notes: [search]\n';

/** PYTHON_IMAGE is the run tool's plain description under the default image, which has no Node. */
const PYTHON_IMAGE = SANDBOX_DESCRIPTION.replace('language: "python", "sh" or "node". ', 'language: "python" or "sh". ');

/** runDescription is the run tool's description in the model's first request. */
function runDescription(box: Sandbox): string {
  const body = box.fake.turns[0]?.body as { tools?: { name: string; description?: string }[] } | undefined;
  const run = body?.tools?.find((t) => t.name === RUN);
  assert.ok(run?.description !== undefined, `no ${RUN} among the tools: ${JSON.stringify(body?.tools?.map((t) => t.name))}`);
  return run.description;
}

test('the model reads which in-process servers its code may call, and how to find their tools', async (t) => {
  const w = await world({ extra: CALLABLE });
  try {
    const { box } = await agent(w, [{ type: 'text', text: 'done' }], { mcpServers: { notes: notes() } });
    const desc = runDescription(box);
    assert.ok(desc.startsWith(`${PYTHON_IMAGE}\n\nCode mode:`), desc);
    assert.match(desc, /\n- notes \(1 tool\): the team's notes\n/, 'one callable tool of two; the server says what it is for');
    assert.match(desc, /gatekeeper_tools\.<module>/);
    assert.doesNotMatch(desc, /Search the notes|"q"/, 'no tool description or schema: the model reads the wrappers when it needs them');
    t.diagnostic(`run tool description: ${String(Buffer.byteLength(desc))} bytes with one server, ${String(Buffer.byteLength(SANDBOX_DESCRIPTION))} without`);
  } finally {
    await closeWorld(w);
  }
});

test('without a callable server the description is the plain one, naming the image\'s languages', async () => {
  const w = await world();
  try {
    const { box } = await agent(w, [{ type: 'text', text: 'done' }], { mcpServers: { notes: notes() } });
    assert.notEqual(PYTHON_IMAGE, SANDBOX_DESCRIPTION);
    assert.equal(runDescription(box), PYTHON_IMAGE);
  } finally {
    await closeWorld(w);
  }
});
