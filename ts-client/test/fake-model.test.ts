// The fake model alone, spoken to over HTTP as Claude Code speaks to it.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { startFakeModel } from '../src/testing/index.js';

interface SseEvent {
  event: string;
  data: Record<string, unknown>;
}

async function post(url: string, body: unknown, path = '/v1/messages?beta=true'): Promise<{ status: number; type: string; text: string }> {
  const res = await fetch(url + path, { method: 'POST', headers: { 'content-type': 'application/json' }, body: JSON.stringify(body) });
  return { status: res.status, type: res.headers.get('content-type') ?? '', text: await res.text() };
}

function sse(text: string): SseEvent[] {
  return text
    .split('\n\n')
    .filter((b) => b.trim() !== '')
    .map((b) => {
      const [ev, data] = b.split('\n');
      return { event: (ev ?? '').replace(/^event: /, ''), data: JSON.parse((data ?? '').replace(/^data: /, '')) as Record<string, unknown> };
    });
}

function textOf(stream: string): string {
  return sse(stream)
    .filter((e) => e.event === 'content_block_delta')
    .map((e) => (e.data.delta as { text: string }).text)
    .join('');
}

const TOOLS = [{ name: 'Read', input_schema: { type: 'object' } }];

test('a tool turn streams the Messages API events, the input in pieces', async () => {
  const fake = await startFakeModel({ script: [{ type: 'tool_use', name: 'Read', input: { file_path: '/w/a.txt' }, id: 'toolu_x' }] });
  try {
    const r = await post(fake.url, { model: 'm', stream: true, tools: TOOLS, messages: [{ role: 'user', content: 'hi' }] });
    assert.equal(r.status, 200);
    assert.match(r.type, /text\/event-stream/);
    const events = sse(r.text);
    assert.deepEqual(
      events.map((e) => e.event),
      ['message_start', 'content_block_start', 'content_block_delta', 'content_block_delta', 'content_block_stop', 'message_delta', 'message_stop'],
    );
    assert.deepEqual(events[1]?.data.content_block, { type: 'tool_use', id: 'toolu_x', name: 'Read', input: {} });
    const json = events
      .filter((e) => e.event === 'content_block_delta')
      .map((e) => (e.data.delta as { partial_json: string }).partial_json)
      .join('');
    assert.deepEqual(JSON.parse(json), { file_path: '/w/a.txt' });
    assert.deepEqual((events[5]?.data.delta as { stop_reason: string }).stop_reason, 'tool_use');
  } finally {
    await fake.close();
  }
});

test('side requests get minimal replies and use no turn; a function turn sees the last tool_result', async () => {
  const seen: string[] = [];
  const fake = await startFakeModel({
    script: [
      { type: 'tool_use', name: 'Read', input: {}, id: 'toolu_1' },
      (ctx) => {
        seen.push(ctx.toolResults.map((t) => `${t.tool_use_id}:${t.text}:${String(t.is_error)}`).join(','));
        return { type: 'text', text: `you said ${ctx.toolResults[0]?.text ?? ''}` };
      },
    ],
  });
  try {
    const head = await fetch(fake.url + '/api/hello', { method: 'HEAD' });
    assert.equal(head.status, 200);
    const count = await post(fake.url, { model: 'm', messages: [] }, '/v1/messages/count_tokens?beta=true');
    assert.deepEqual(JSON.parse(count.text), { input_tokens: 1 });
    const title = await post(fake.url, { model: 'claude-haiku', stream: false, messages: [{ role: 'user', content: 'title?' }] });
    assert.equal((JSON.parse(title.text) as { stop_reason: string }).stop_reason, 'end_turn');
    const toolless = await post(fake.url, { model: 'm', stream: true, messages: [{ role: 'user', content: 'x' }] });
    assert.deepEqual(sse(toolless.text).find((e) => e.event === 'content_block_start')?.data.content_block, { type: 'text', text: '' });
    assert.equal(fake.turns.length, 0, 'no side request used a turn');

    await post(fake.url, { model: 'm', stream: true, tools: TOOLS, messages: [{ role: 'user', content: 'go' }] });
    const second = await post(fake.url, {
      model: 'm',
      stream: true,
      tools: TOOLS,
      messages: [
        { role: 'user', content: 'go' },
        { role: 'assistant', content: [{ type: 'tool_use', id: 'toolu_1', name: 'Read', input: {} }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'toolu_1', content: [{ type: 'text', text: 'denied!' }], is_error: true }] },
      ],
    });
    assert.equal(textOf(second.text), 'you said denied!');
    assert.deepEqual(seen, ['toolu_1:denied!:true']);
    assert.deepEqual(fake.toolResults(), [{ tool_use_id: 'toolu_1', text: 'denied!', is_error: true, content: [{ type: 'text', text: 'denied!' }] }]);
    assert.equal(fake.turns.length, 2);
    assert.equal(fake.requests.length, 6);
    assert.deepEqual(fake.errors, []);
    const exhausted = await post(fake.url, { model: 'm', stream: true, tools: TOOLS, messages: [{ role: 'user', content: 'more' }] });
    assert.equal(textOf(exhausted.text), '(fake model: script exhausted)');
  } finally {
    await fake.close();
  }
});

test('env points the SDK at the fake and keeps Claude Code off the network', async () => {
  const fake = await startFakeModel({ script: [] });
  try {
    const env = fake.env('/tmp/fake-home');
    assert.equal(env.ANTHROPIC_BASE_URL, fake.url);
    assert.equal(env.HOME, '/tmp/fake-home');
    assert.equal(env.CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC, '1');
    assert.ok(env.ANTHROPIC_API_KEY);
  } finally {
    await fake.close();
  }
});
