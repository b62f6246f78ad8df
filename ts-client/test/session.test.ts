// The client against an in-test sidecar and an injected socket: every way of
// not getting a proper decision is a deny that says why.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { resolveConfig, type CreateSocket, type SocketHandlers } from '../src/config.js';
import { Connection } from '../src/connection.js';
import { GatekeeperError } from '../src/protocol.js';
import { SidecarQuery, UNAVAILABLE_RULE } from '../src/session.js';
import { startFakeSidecar, type FakeSidecarOptions } from './helpers/fake-sidecar.js';

async function withSidecar(opts: FakeSidecarOptions, fn: (sq: SidecarQuery, fake: Awaited<ReturnType<typeof startFakeSidecar>>) => Promise<void>, override?: Record<string, unknown>, timeoutMs = 300): Promise<void> {
  const fake = await startFakeSidecar(opts);
  const conn = new Connection(resolveConfig({ url: fake.url, token: fake.token, decisionTimeoutMs: timeoutMs }, {}));
  const sq = new SidecarQuery(conn, override);
  try {
    await fn(sq, fake);
  } finally {
    await sq.close();
    conn.close();
    await fake.close();
  }
}

test('a decision of the sidecar is passed through, with the hello, query and Authorization as the protocol wants', async () => {
  await withSidecar({ onDecide: () => ({ type: 'decision', decision: 'deny', reason: 'no reading secrets', rule: 'host_fs.deny_glob' }) }, async (sq, fake) => {
    const first = await sq.firstOpen(1000);
    assert.deepEqual(first.effectivePolicy?.tools, { allow: ['Read', 'mcp__sandboxed_code__run'], ask: [], deny: ['Bash'] });
    const d = await sq.decide('PreToolUse', 'Read', { file_path: '/home/u/.ssh/id_rsa' }, 'toolu_1');
    assert.deepEqual(d, { decision: 'deny', reason: 'no reading secrets', rule: 'host_fs.deny_glob' });
    assert.equal(fake.upgrades[0]?.authorization, `Bearer ${fake.token}`);
    assert.equal(fake.upgrades[0]?.origin, undefined, 'no Origin header');
    assert.deepEqual(
      fake.frames.map((f) => f.type),
      ['hello', 'open_query', 'decide'],
    );
    assert.equal(fake.frames[0]?.v, 1);
    assert.equal(fake.frames[1]?.sandbox_policy, undefined, 'no override, no sandbox_policy field');
    const decide = fake.frames[2];
    assert.deepEqual(decide, {
      type: 'decide',
      id: decide?.id,
      query_id: 'q_fake_1',
      event: 'PreToolUse',
      tool_name: 'Read',
      tool_input: { file_path: '/home/u/.ssh/id_rsa' },
      tool_use_id: 'toolu_1',
    });
  });
});

test('mcp_server is sent for MCP tools and left out otherwise', async () => {
  await withSidecar({}, async (sq, fake) => {
    await sq.decide('PreToolUse', 'mcp__notes__add', {}, 'toolu_2', { name: 'notes', source: 'stdio' });
    assert.deepEqual(fake.frames.at(-1)?.mcp_server, { name: 'notes', source: 'stdio' });
  });
});

test('no reply within decisionTimeoutMs is a deny saying gatekeeper is unavailable', async () => {
  await withSidecar({ onDecide: () => null }, async (sq, fake) => {
    const d = await sq.decide('PreToolUse', 'Read', { file_path: '/x' }, 'toolu_1');
    assert.deepEqual(fake.frames.filter((f) => f.type === 'decide').map((f) => f.tool_use_id), ['toolu_1'], 'the sidecar was asked, and never answered');
    assert.equal(d.decision, 'deny');
    assert.equal(d.rule, UNAVAILABLE_RULE);
    assert.match(d.reason, /gatekeeper is unavailable \(no decision within 300 ms/);
  });
});

test('a malformed reply is a deny, whatever it claims', async () => {
  const cases: { name: string; answer: Record<string, unknown> | string; want: RegExp }[] = [
    { name: 'not JSON', answer: 'allow', want: /the sidecar sent a malformed frame: frame is not JSON/ },
    { name: 'an unknown decision', answer: { type: 'decision', decision: 'yes', reason: 'r', rule: 'x' }, want: /unknown decision "yes"/ },
    { name: 'allow without a rule', answer: { type: 'decision', decision: 'allow', reason: 'r' }, want: /lacks rule/ },
    { name: 'a reason that is not a string', answer: { type: 'decision', decision: 'allow', reason: 1, rule: 'x' }, want: /reason of the wrong type/ },
    { name: 'an allow for another tool use', answer: { type: 'decision', decision: 'allow', reason: 'r', rule: 'x', tool_use_id: 'toolu_other' }, want: /answered for tool use "toolu_other"/ },
    { name: 'a reply of the wrong type', answer: { type: 'query_closed', query_id: 'q' }, want: /answered a decide with a query_closed frame/ },
  ];
  for (const c of cases) {
    await withSidecar(
      {
        onDecide: (f) => (typeof c.answer === 'string' ? `{"type":"decision","id":${JSON.stringify(f.id)},"decision":` + c.answer : { ...c.answer }),
      },
      async (sq) => {
        const d = await sq.decide('PreToolUse', 'Read', { file_path: '/x' }, 'toolu_1');
        assert.equal(d.decision, 'deny', c.name);
        assert.equal(d.rule, UNAVAILABLE_RULE, c.name);
        assert.match(d.reason, c.want, c.name);
      },
    );
  }
});

test('an error frame is a deny naming the error', async () => {
  await withSidecar({ onDecide: () => ({ type: 'error', code: 'too_many_requests', message: 'slow down' }) }, async (sq) => {
    const d = await sq.decide('PreToolUse', 'Read', { file_path: '/x' }, 'toolu_1');
    assert.equal(d.decision, 'deny');
    assert.match(d.reason, /gatekeeper is unavailable \(it answered with error too_many_requests: slow down\)/);
  });
});

test('a tool input that is not an object is denied without asking', async () => {
  await withSidecar({}, async (sq, fake) => {
    const d = await sq.decide('PreToolUse', 'Read', 'oops', 'toolu_1');
    assert.equal(d.decision, 'deny');
    assert.equal(fake.frames.filter((f) => f.type === 'decide').length, 0);
  });
});

test('an unreachable sidecar is a prompt deny saying why', async () => {
  // A deadline far beyond what any machine needs to fail a connect: a
  // decision that waited for it instead of failing with the attempt shows.
  const conn = new Connection(resolveConfig({ url: 'unix:///nonexistent/gk.sock', token: 't', decisionTimeoutMs: 60_000 }, {}));
  const sq = new SidecarQuery(conn, undefined);
  const first = await sq.firstOpen(1500);
  assert.match(first.unavailable ?? '', /ENOENT|ECONNREFUSED/);
  const t0 = Date.now();
  const d = await sq.decide('PreToolUse', 'Read', { file_path: '/x' }, 'toolu_1');
  assert.ok(Date.now() - t0 < 30_000, `an attempt that fails fails the decision at once, not at its 60 s deadline (it took ${String(Date.now() - t0)} ms)`);
  assert.equal(d.decision, 'deny');
  assert.match(d.reason, /gatekeeper is unavailable \(.*(ENOENT|ECONNREFUSED)/);
  await sq.close();
  conn.close();
});

test('an upgrade refused with 401 is reported as the reason the sidecar is unavailable', async () => {
  const fake = await startFakeSidecar();
  const conn = new Connection(resolveConfig({ url: fake.url, token: 'wrong', decisionTimeoutMs: 1000 }, {}));
  const sq = new SidecarQuery(conn, undefined);
  const first = await sq.firstOpen(1000);
  assert.match(first.unavailable ?? '', /HTTP 401/);
  await sq.close();
  conn.close();
  await fake.close();
});

test('a rejected override fails the first open with every violation', async () => {
  const violations = ['sandbox.proc.memory 8g exceeds ceiling 1g', 'sandbox.net.allow host evil.example is not within ceilings.net_hosts'];
  await withSidecar(
    { onOpen: () => ({ type: 'error', code: 'policy_override_rejected', message: 'sandbox policy override rejected: 2 violations', violations }) },
    async (sq, fake) => {
      await assert.rejects(sq.firstOpen(1000), (err: unknown) => {
        assert.ok(err instanceof GatekeeperError);
        assert.equal(err.code, 'policy_override_rejected');
        assert.deepEqual(err.violations, violations);
        assert.match(err.message, /8g exceeds ceiling 1g; sandbox.net.allow host evil.example/);
        return true;
      });
      assert.deepEqual(fake.frames.at(-1)?.sandbox_policy, { proc: { memory: '8g' } });
      const d = await sq.decide('PreToolUse', 'Read', { file_path: '/x' }, 'toolu_1');
      assert.equal(d.decision, 'deny');
      assert.match(d.reason, /override is rejected: sandbox.proc.memory 8g exceeds ceiling 1g/);
    },
    { proc: { memory: '8g' } },
  );
});

test('after a lost connection, decisions deny until the client reconnects and reopens the query with the same override', async () => {
  let live = true;
  await withSidecar(
    { onDecide: () => (live ? { type: 'decision', decision: 'allow', reason: 'ok', rule: 'fake.allow' } : null) },
    async (sq, fake) => {
      await sq.firstOpen(1000);
      assert.equal((await sq.decide('PreToolUse', 'Read', { file_path: '/a' }, 't1')).decision, 'allow');
      live = false;
      const pending = sq.decide('PreToolUse', 'Read', { file_path: '/b' }, 't2');
      await new Promise((r) => setTimeout(r, 50));
      fake.dropConnections();
      const lost = await pending;
      assert.equal(lost.decision, 'deny');
      assert.match(lost.reason, /gatekeeper is unavailable \(connection lost/);
      live = true;
      const again = await sq.decide('PreToolUse', 'Read', { file_path: '/c' }, 't3');
      assert.equal(again.decision, 'allow');
      const opens = fake.frames.filter((f) => f.type === 'open_query');
      assert.equal(opens.length, 2);
      assert.deepEqual(opens[1]?.sandbox_policy, { proc: { timeout: '30s' } });
      assert.equal(fake.frames.filter((f) => f.type === 'decide').at(-1)?.query_id, 'q_fake_2', 'the new connection uses its own query id');
      assert.equal(fake.upgrades.length, 2);
    },
    { proc: { timeout: '30s' } },
    1000,
  );
});

test('close sends close_query and later decisions deny', async () => {
  await withSidecar({}, async (sq, fake) => {
    await sq.firstOpen(1000);
    await sq.close();
    assert.deepEqual(
      fake.frames.filter((f) => f.type === 'close_query').map((f) => f.query_id),
      ['q_fake_1'],
    );
    const d = await sq.decide('PreToolUse', 'Read', { file_path: '/x' }, 't');
    assert.equal(d.decision, 'deny');
    assert.match(d.reason, /query was closed/);
  });
});

test('run returns the run_result, and a refused run throws its code and rule', async () => {
  await withSidecar(
    {
      onRun: (f, send) => {
        if (f.code === 'bad') send({ type: 'error', code: 'run_denied', message: 'no allow for this tool use', rule: 'run.not_allowed' });
        else {
          send({ type: 'output', run_id: 'r', stream: 'stdout', data: 'hel' });
          send({ type: 'output', run_id: 'r', stream: 'stdout', data: 'lo\n' });
          send({ type: 'run_result', run_id: 'r', exit_code: 3, reason: 'exited', stdout: 'hello\n', stderr: 'warn\n', truncated: false, timed_out: false, oom_killed: false });
        }
      },
    },
    async (sq, fake) => {
      await sq.firstOpen(1000);
      const out: string[] = [];
      const r = await sq.run('toolu_9', { language: 'python', code: 'print(1)', files: { 'a.txt': 'x' }, timeout_s: 1.5 }, (_s, d) => out.push(d));
      assert.equal(r.exit_code, 3);
      assert.equal(r.stdout, 'hello\n');
      assert.deepEqual(out, ['hel', 'lo\n']);
      const run = fake.frames.find((f) => f.type === 'run');
      assert.deepEqual(
        { tool_use_id: run?.tool_use_id, language: run?.language, files: run?.files, timeout_ms: run?.timeout_ms, query_id: run?.query_id },
        { tool_use_id: 'toolu_9', language: 'python', files: { 'a.txt': 'x' }, timeout_ms: 1500, query_id: 'q_fake_1' },
      );
      await assert.rejects(sq.run('toolu_10', { language: 'sh', code: 'bad' }), (err: unknown) => err instanceof GatekeeperError && err.code === 'run_denied' && err.rule === 'run.not_allowed');
    },
  );
});

test('an injected socket replaces the transport', async () => {
  const sent: Record<string, unknown>[] = [];
  let seen: { address: string; headers: Record<string, string> } | undefined;
  const createSocket: CreateSocket = (target, h: SocketHandlers) => {
    seen = target;
    queueMicrotask(() => h.onOpen());
    return {
      send(data) {
        const f = JSON.parse(data) as Record<string, unknown>;
        sent.push(f);
        const reply = (r: Record<string, unknown>): void => queueMicrotask(() => h.onMessage(JSON.stringify({ id: f.id, ...r }), false));
        if (f.type === 'hello') reply({ type: 'welcome', v: 1, server: 'injected', policy_revision: 'r' });
        if (f.type === 'open_query') reply({ type: 'query_opened', query_id: 'q_inj', policy_hash: 'h', effective_policy: {} });
        if (f.type === 'decide') reply({ type: 'decision', decision: 'ask', reason: 'a human should look', rule: 'tools.ask_list' });
        if (f.type === 'close_query') reply({ type: 'query_closed', query_id: f.query_id });
      },
      close() {
        queueMicrotask(() => h.onClose('closed by client'));
      },
    };
  };
  const conn = new Connection(resolveConfig({ url: 'ws://127.0.0.1:1', token: 'tok', createSocket }, {}));
  const sq = new SidecarQuery(conn, undefined);
  await sq.firstOpen(1000);
  const d = await sq.decide('canUseTool', 'Bash', { command: 'ls' }, '');
  assert.deepEqual(d, { decision: 'ask', reason: 'a human should look', rule: 'tools.ask_list' });
  assert.deepEqual(seen, { address: 'ws://127.0.0.1:1/v1/ws', headers: { Authorization: 'Bearer tok' } });
  assert.equal(sent.find((f) => f.type === 'decide')?.event, 'canUseTool');
  await sq.close();
  conn.close();
});

test('a query opened right after the last one closed gets a fresh connection, not the closing one', async () => {
  const fake = await startFakeSidecar();
  const conn = new Connection(resolveConfig({ url: fake.url, token: fake.token }, {}));
  try {
    for (let i = 1; i <= 3; i++) {
      const sq = new SidecarQuery(conn, undefined);
      const first = await sq.firstOpen(1000);
      assert.equal(first.unavailable, undefined, `query ${String(i)}: ${String(first.unavailable)}`);
      assert.equal((await sq.decide('PreToolUse', 'Read', { file_path: '/a' }, `t${String(i)}`)).decision, 'allow');
      await sq.close();
    }
    assert.equal(fake.upgrades.length, 3);
  } finally {
    conn.close();
    await fake.close();
  }
});
