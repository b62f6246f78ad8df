// The real Agent SDK and Claude Code, the loopback fake model, and the
// in-test sidecar: what the client puts into the SDK and how the SDK's
// callbacks reach the sidecar. The same flows against the real sidecar are
// in integration.test.ts.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { join } from 'node:path';
import { createSdkMcpServer, query as sdkQuery, tool } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { connect, GatekeeperConfigError, GatekeeperError, GatekeeperUnavailableError, query } from '../src/index.js';
import { drain, initTools, makeSandbox, resultOf, spawnWatch } from './helpers/agent.js';
import { DEFAULT_POLICY, startFakeSidecar, type FakeSidecarOptions } from './helpers/fake-sidecar.js';

const RUN = 'mcp__sandboxed_code__run';

/** until polls cond every 50 ms until it holds or 15 s passed; the caller asserts it. */
async function until(cond: () => boolean): Promise<void> {
  for (const deadline = Date.now() + 15_000; !cond() && Date.now() < deadline; ) await new Promise((r) => setTimeout(r, 50));
}

async function setup(sidecar: FakeSidecarOptions, script: Parameters<typeof makeSandbox>[0]) {
  const gk = await startFakeSidecar(sidecar);
  const box = await makeSandbox(script);
  return {
    gk,
    box,
    gatekeeper: { url: gk.url, token: gk.token, decisionTimeoutMs: 1500 },
    async cleanup() {
      await box.cleanup();
      await gk.close();
    },
  };
}

test('the run tool sends a run frame for the tool use gatekeeper allowed, and the model reads its output', async () => {
  const s = await setup({}, [{ type: 'tool_use', name: RUN, input: { language: 'python', code: 'print("hello")' }, id: 'toolu_run_1' }, { type: 'text', text: 'done' }]);
  try {
    const run = await drain(query({ prompt: 'run it', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper } }));
    assert.equal(run.error, undefined, String(run.error));
    const result = s.box.fake.toolResult('toolu_run_1');
    assert.ok(result, 'the SDK sent a tool_result');
    assert.equal(result.is_error, false);
    // Claude Code hands the model the structuredContent (as JSON) when there is one.
    assert.deepEqual(JSON.parse(result.text), {
      exit_code: 0,
      reason: 'exited',
      stdout: 'ran python\n',
      stderr: '',
      truncated: false,
      timed_out: false,
      oom_killed: false,
      duration_ms: 5,
    });
    const decides = s.gk.frames.filter((f) => f.type === 'decide');
    assert.deepEqual(
      decides.map((f) => [f.event, f.tool_name, f.tool_use_id, f.mcp_server]),
      [
        ['PreToolUse', RUN, 'toolu_run_1', { name: 'sandboxed_code', source: 'sdk' }],
        ['canUseTool', RUN, 'toolu_run_1', { name: 'sandboxed_code', source: 'sdk' }],
      ],
    );
    const tools = (s.box.fake.turns[0]?.body as { tools?: { name: string }[] }).tools?.map((t) => t.name) ?? [];
    assert.ok(tools.includes(RUN), `the model is offered the run tool itself, not behind tool search: ${tools.join(', ')}`);
    const runFrame = s.gk.frames.find((f) => f.type === 'run');
    assert.equal(runFrame?.tool_use_id, 'toolu_run_1', 'the handler learnt the tool use id');
    assert.equal(runFrame?.code, 'print("hello")');
    assert.equal(s.gk.frames.at(-1)?.type, 'close_query', 'the query is closed when the iteration ends');
  } finally {
    await s.cleanup();
  }
});

test('the sidecar query is opened before the first model request', async () => {
  let requestsAtOpen = -1;
  let box: Awaited<ReturnType<typeof makeSandbox>> | undefined;
  const s = await setup(
    {
      onOpen: () => {
        requestsAtOpen = box?.fake.requests.length ?? -2;
        return undefined;
      },
    },
    [{ type: 'text', text: 'hi' }],
  );
  box = s.box;
  try {
    const run = await drain(query({ prompt: 'hello', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper } }));
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(requestsAtOpen, 0);
    assert.ok(s.box.fake.turns.length >= 1);
  } finally {
    await s.cleanup();
  }
});

test('a rejected override fails the iteration at once with the violations, and nothing reaches the model', async () => {
  const violations = ['sandbox.proc.memory 8g exceeds ceiling 1g'];
  const s = await setup({ onOpen: () => ({ type: 'error', code: 'policy_override_rejected', message: 'sandbox policy override rejected: 1 violations', violations }) }, [
    { type: 'text', text: 'should never be asked' },
  ]);
  const claude = spawnWatch();
  try {
    const q = query({ prompt: 'hello', options: { ...s.box.sdkOptions(), spawnClaudeCodeProcess: claude.spawnClaudeCodeProcess, gatekeeper: s.gatekeeper, sandboxPolicy: { proc: { memory: '8g' } } } });
    const run = await drain(q);
    assert.ok(run.error instanceof GatekeeperError, String(run.error));
    assert.equal(run.error.code, 'policy_override_rejected');
    assert.deepEqual(run.error.violations, violations);
    assert.match(run.error.message, /8g exceeds ceiling 1g/);
    assert.equal(run.messages.length, 0);
    assert.deepEqual(claude.spawned, [], 'Claude Code was never started, so no request can reach the model later');
    assert.equal(s.box.fake.requests.length, 0, 'no request reached the model');
  } finally {
    await s.cleanup();
  }
});

test('options that take tool calls out of gatekeeper hands are refused at once', () => {
  const gatekeeper = { url: 'unix:///nonexistent.sock', token: 't' };
  const refused: { name: string; options: Parameters<typeof query>[0]['options']; want: RegExp }[] = [
    { name: 'bypassPermissions', options: { permissionMode: 'bypassPermissions', gatekeeper }, want: /bypassPermissions/ },
    { name: 'allowDangerouslySkipPermissions', options: { allowDangerouslySkipPermissions: true, gatekeeper }, want: /allowDangerouslySkipPermissions/ },
    { name: 'permissionPromptToolName', options: { permissionPromptToolName: 'mcp__x__y', gatekeeper }, want: /permissionPromptToolName/ },
    { name: 'settings that disable hooks', options: { settings: { disableAllHooks: true }, gatekeeper }, want: /disableAllHooks/ },
    {
      name: 'a server of the caller named sandboxed_code',
      options: { mcpServers: { sandboxed_code: { command: 'evil' } }, gatekeeper },
      want: /"sandboxed_code" is reserved by gatekeeper/,
    },
  ];
  for (const c of refused) {
    assert.throws(() => query({ prompt: 'x', options: c.options }), (err: unknown) => err instanceof GatekeeperConfigError && c.want.test(err.message), c.name);
  }
});

test('setPermissionMode cannot switch a running query to bypassPermissions', async () => {
  const s = await setup({}, [{ type: 'text', text: 'hi' }]);
  try {
    const q = query({ prompt: 'hello', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper } });
    await assert.rejects(q.setPermissionMode('bypassPermissions'), GatekeeperConfigError);
    q.close();
  } finally {
    await s.cleanup();
  }
});

test('Bash is left out unless the policy allows it', async () => {
  for (const [name, tools, want] of [
    ['denied', DEFAULT_POLICY.tools, false],
    ['allowed', { allow: ['Bash'], ask: [], deny: [] }, true],
    ['asked', { allow: [], ask: ['Bash'], deny: [] }, true],
  ] as const) {
    const s = await setup({ effectivePolicy: { ...DEFAULT_POLICY, tools } }, [{ type: 'text', text: 'hi' }]);
    try {
      const run = await drain(query({ prompt: 'hello', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper } }));
      assert.equal(run.error, undefined, String(run.error));
      assert.equal(initTools(run).includes('Bash'), want, name);
      assert.ok(initTools(run).includes(RUN), `${name}: the run tool is there`);
    } finally {
      await s.cleanup();
    }
  }
});

test('a sidecar that does not answer in time denies the call, and the tool does not run', async () => {
  let marker = '';
  const s = await setup({ onDecide: () => null, effectivePolicy: { ...DEFAULT_POLICY, tools: { allow: ['Bash'], ask: [], deny: [] } } }, [
    () => ({ type: 'tool_use', name: 'Bash', input: { command: `touch ${marker}` }, id: 'toolu_b' }),
    { type: 'text', text: 'done' },
  ]);
  marker = join(s.box.root, 'marker');
  try {
    const run = await drain(
      query({
        prompt: 'hello',
        options: { ...s.box.sdkOptions(), gatekeeper: { ...s.gatekeeper, decisionTimeoutMs: 500 } },
      }),
    );
    assert.equal(run.error, undefined, String(run.error));
    const r = s.box.fake.toolResult('toolu_b');
    assert.ok(r);
    assert.equal(r.is_error, true);
    assert.match(r.text, /gatekeeper is unavailable \(no decision within 500 ms/);
    assert.equal(existsSync(marker), false);
  } finally {
    await s.cleanup();
  }
});

test('ask: without a canUseTool of the caller the call is denied; with one, the caller decides', async () => {
  const askAll: FakeSidecarOptions = {
    effectivePolicy: { ...DEFAULT_POLICY, tools: { allow: [], ask: ['Write'], deny: [] } },
    onDecide: () => ({ type: 'decision', decision: 'ask', reason: 'Write needs a human', rule: 'tools.ask_list' }),
  };
  for (const withCaller of [false, true]) {
    let target = '';
    const s = await setup(askAll, [() => ({ type: 'tool_use', name: 'Write', input: { file_path: target, content: 'x' }, id: 'toolu_w' }), { type: 'text', text: 'done' }]);
    target = join(s.box.ws, 'out.txt');
    const asked: string[] = [];
    try {
      const run = await drain(
        query({
          prompt: 'write',
          options: {
            ...s.box.sdkOptions(),
            gatekeeper: s.gatekeeper,
            ...(withCaller
              ? {
                  canUseTool: async (name: string, input: Record<string, unknown>) => {
                    asked.push(name);
                    return { behavior: 'allow' as const, updatedInput: input };
                  },
                }
              : {}),
          },
        }),
      );
      assert.equal(run.error, undefined, String(run.error));
      const r = s.box.fake.toolResult('toolu_w');
      assert.ok(r);
      if (withCaller) {
        assert.deepEqual(asked, ['Write']);
        assert.equal(r.is_error, false, r.text);
        assert.equal(existsSync(target), true);
      } else {
        assert.equal(r.is_error, true);
        assert.match(r.text, /Write needs a human \[gatekeeper rule: tools.ask_list\]; no canUseTool handler/);
        assert.equal(existsSync(target), false);
      }
      const events = s.gk.frames.filter((f) => f.type === 'decide').map((f) => f.event);
      assert.deepEqual(events, ['PreToolUse', 'canUseTool'], 'a PreToolUse ask goes on to canUseTool');
    } finally {
      await s.cleanup();
    }
  }
});

test("the caller's MCP servers are reported with their source, and a denied tool's handler never runs", async () => {
  let ran = false;
  const notes = createSdkMcpServer({
    name: 'notes',
    alwaysLoad: true,
    tools: [
      tool('add', 'Add a note', { text: z.string() }, async () => {
        ran = true;
        return { content: [{ type: 'text', text: 'added' }] };
      }),
    ],
  });
  const s = await setup({ onDecide: (f) => (f.tool_name === 'mcp__notes__add' ? { type: 'decision', decision: 'deny', reason: 'tool "mcp__notes__add" is not allowlisted by the gatekeeper policy', rule: 'tools.not_allowlisted' } : { type: 'decision', decision: 'allow', reason: 'ok', rule: 'x' }) }, [
    { type: 'tool_use', name: 'mcp__notes__add', input: { text: 'hi' }, id: 'toolu_n' },
    { type: 'text', text: 'done' },
  ]);
  try {
    const run = await drain(query({ prompt: 'note', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper, mcpServers: { notes } } }));
    assert.equal(run.error, undefined, String(run.error));
    const r = s.box.fake.toolResult('toolu_n');
    assert.ok(r);
    assert.equal(r.is_error, true);
    assert.match(r.text, /not allowlisted by the gatekeeper policy \[gatekeeper rule: tools.not_allowlisted\]/);
    assert.equal(ran, false);
    assert.deepEqual(s.gk.frames.find((f) => f.type === 'decide')?.mcp_server, { name: 'notes', source: 'sdk' });
  } finally {
    await s.cleanup();
  }
});

test('connect(): options() spread into a plain SDK query() decides through the sidecar, and the end of the SDK query closes it', async () => {
  const s = await setup({ onDecide: () => ({ type: 'decision', decision: 'deny', reason: 'nope', rule: 'test.deny' }) }, [
    { type: 'tool_use', name: RUN, input: { language: 'sh', code: 'echo hi' }, id: 'toolu_c' },
    { type: 'text', text: 'done' },
  ]);
  const client = connect(s.gatekeeper);
  try {
    const options = await client.options({ ...s.box.sdkOptions(), sandboxPolicy: { proc: { timeout: '30s' } } });
    const run = await drain(sdkQuery({ prompt: 'go', options }));
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(resultOf(run)?.type, 'result');
    const r = s.box.fake.toolResult('toolu_c');
    assert.ok(r);
    assert.match(r.text, /nope \[gatekeeper rule: test.deny\]/);
    assert.deepEqual(s.gk.frames.find((f) => f.type === 'open_query')?.sandbox_policy, { proc: { timeout: '30s' } });
    assert.equal(s.gk.frames.filter((f) => f.type === 'run').length, 0);
    await until(() => s.gk.frames.some((f) => f.type === 'close_query'));
    assert.ok(s.gk.frames.some((f) => f.type === 'close_query'), 'the end of the SDK query closed the sidecar query');
  } finally {
    await client.close();
    await s.cleanup();
  }
});

test('breaking out of the iteration closes the sidecar query', async () => {
  const s = await setup({}, [{ type: 'text', text: 'hi' }]);
  try {
    const q = query({ prompt: 'hello', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper } });
    for await (const m of q) {
      assert.equal(m.type, 'system');
      break;
    }
    assert.deepEqual(
      s.gk.frames.filter((f) => f.type === 'close_query').map((f) => f.query_id),
      ['q_fake_1'],
    );
  } finally {
    await s.cleanup();
  }
});

test('aborting the query closes the sidecar query and ends the iteration', async () => {
  const s = await setup({}, [{ type: 'text', text: 'hi' }]);
  try {
    const abortController = new AbortController();
    const q = query({ prompt: 'hello', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper, abortController } });
    const first = await q.next();
    assert.equal(first.done, false);
    abortController.abort();
    const run = await drain(q, 10_000);
    assert.match(String(run.error), /abort/i, 'the iteration ends with the abort');
    await until(() => s.gk.frames.some((f) => f.type === 'close_query'));
    assert.equal(s.gk.frames.filter((f) => f.type === 'close_query').length, 1);
  } finally {
    await s.cleanup();
  }
});

test('control methods start the query lazily and reach the SDK Query', async () => {
  const s = await setup({}, [{ type: 'text', text: 'hi' }]);
  try {
    const q = query({ prompt: 'hello', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper } });
    assert.equal(s.gk.frames.length, 0, 'nothing happens before the query is used');
    const init = await q.initializationResult();
    assert.ok(Array.isArray(init.commands));
    assert.deepEqual(
      s.gk.frames.map((f) => f.type),
      ['hello', 'open_query'],
    );
    const run = await drain(q);
    assert.equal(run.error, undefined, String(run.error));
    assert.equal(resultOf(run)?.type, 'result');
  } finally {
    await s.cleanup();
  }
});

test('a sidecar unreachable at start: the first step throws GatekeeperUnavailableError naming the socket, and Claude Code never starts', async () => {
  const box = await makeSandbox([{ type: 'tool_use', name: 'Read', input: { file_path: '/etc/hostname' }, id: 'toolu_r' }, { type: 'text', text: 'done' }]);
  const watch = spawnWatch();
  const sock = join(box.root, 'no-such.sock');
  try {
    const run = await drain(query({ prompt: 'read', options: { ...box.sdkOptions(), spawnClaudeCodeProcess: watch.spawnClaudeCodeProcess, gatekeeper: { url: `unix://${sock}`, token: 't', logger: {} } } }));
    assert.ok(run.error instanceof GatekeeperUnavailableError, `a GatekeeperUnavailableError, not ${String(run.error)}`);
    assert.equal(run.error.code, 'unreachable');
    assert.equal(run.error.url, `unix://${sock}`);
    assert.ok(run.error.message.includes(`gatekeeper is not reachable at unix://${sock} (`), run.error.message);
    assert.match(run.error.reason, /ENOENT/);
    assert.match(run.error.message, /gatekeeper serve is running/);
    assert.deepEqual(watch.spawned, [], 'Claude Code was not started');
    assert.equal(box.fake.requests.length, 0, 'nothing reached the model');
  } finally {
    await box.cleanup();
  }
});

// A 1x1 PNG, as a sandboxed program would return it.
const PNG_1X1 = 'iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==';

test('a run in a session: the model reads its lost state, onSandboxRun gets the session', async () => {
  const lost = { reason: 'expired', lost: "the Python interpreter's variables and imports", fresh: true };
  const session = { run: 1, started_at: '2026-12-02T05:00:00.000Z', age_ms: 3, idle_ms: 0, restarts: 1, peak_memory_bytes: 0 };
  const s = await setup(
    {
      onRun: (_f, send) =>
        send({ type: 'run_result', run_id: 'r_s', exit_code: 0, reason: 'exited', stdout: 'x\n', stderr: '', truncated: false, timed_out: false, oom_killed: false, duration_ms: 4, session, state_lost: lost }),
    },
    [{ type: 'tool_use', name: RUN, input: { language: 'python', code: 'print(df)' }, id: 'toolu_sess' }, { type: 'text', text: 'done' }],
  );
  try {
    const runs: import('../src/index.js').SandboxRun[] = [];
    const run = await drain(query({ prompt: 'go on', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper, sandboxPolicy: { session: { idle_timeout: '5m' } }, onSandboxRun: (r) => void runs.push(r) } }));
    assert.equal(run.error, undefined, String(run.error));
    assert.deepEqual(s.gk.frames.find((f) => f.type === 'open_query')?.sandbox_policy, { session: { idle_timeout: '5m' } }, 'the override asks the sidecar for a session');
    const result = s.box.fake.toolResult('toolu_sess');
    assert.ok(result, 'the SDK sent a tool_result');
    const report = JSON.parse(result.text) as import('../src/index.js').SandboxRunReport;
    assert.deepEqual(report.state_lost, lost, 'the model reads why its state is gone, and that this run started afresh');
    assert.equal(runs.length, 1, 'onSandboxRun was called once');
    assert.deepEqual(runs[0]?.session, session, 'the builder gets the session as the wire has it');
    assert.deepEqual(runs[0]?.report.state_lost, lost);
  } finally {
    await s.cleanup();
  }
});

test('files a run returns reach the model (images as image blocks, text inline) and onSandboxRun (decoded)', async () => {
  const longText = 'x'.repeat(9000);
  const s = await setup(
    {
      onRun: (f, send) =>
        send({
          type: 'run_result',
          run_id: 'r_files',
          exit_code: 0,
          reason: 'exited',
          stdout: '',
          stderr: '',
          truncated: false,
          timed_out: false,
          oom_killed: false,
          duration_ms: 7,
          files: [
            { path: 'chart.png', size: 70, sha256: 'a', change: 'created', media_type: 'image/png', base64: PNG_1X1 },
            { path: 'data.bin', size: 3, sha256: 'b', change: 'created', media_type: 'application/octet-stream', base64: 'AP8A' },
            { path: 'long.txt', size: 9000, sha256: 'c', change: 'created', media_type: 'text/plain; charset=utf-8', text: longText },
            { path: 'notes.md', size: 6, sha256: 'd', change: 'modified', media_type: 'text/markdown; charset=utf-8', text: '# sum\n' },
            { path: 'huge.csv', size: 9e6, sha256: 'e', change: 'created', media_type: 'text/csv; charset=utf-8', omitted: 'over budget' },
          ],
          files_omitted: 1,
          workspace: 'saved',
          workspace_note: '',
          echo: f.files,
        }),
    },
    [
      { type: 'tool_use', name: RUN, input: { language: 'python', code: 'draw()', files: { 'in.bin': { base64: 'AAE=' }, 'in.txt': 'hi' }, outputs: ['.'] }, id: 'toolu_files' },
      { type: 'text', text: 'done' },
    ],
  );
  try {
    const runs: import('../src/index.js').SandboxRun[] = [];
    const run = await drain(query({ prompt: 'draw', options: { ...s.box.sdkOptions(), gatekeeper: s.gatekeeper, onSandboxRun: (r) => void runs.push(r) } }));
    assert.equal(run.error, undefined, String(run.error));
    const frame = s.gk.frames.find((f) => f.type === 'run');
    assert.deepEqual(frame?.files, { 'in.bin': { base64: 'AAE=' }, 'in.txt': 'hi' }, 'binary files go to the sidecar in base64, as the model wrote them');
    assert.deepEqual(frame?.outputs, ['.']);

    const result = s.box.fake.toolResult('toolu_files');
    assert.ok(result, 'the SDK sent a tool_result');
    const blocks = result.content as { type: string; source?: { media_type: string; data: string }; text?: string }[];
    const images = blocks.filter((b) => b.type === 'image');
    assert.equal(images.length, 1, `one image block reached the model: ${JSON.stringify(blocks).slice(0, 400)}`);
    assert.equal(images[0]?.source?.media_type, 'image/png');
    assert.equal(images[0]?.source?.data, PNG_1X1);
    const report = JSON.parse(blocks.filter((b) => b.type === 'text').at(-1)?.text ?? '{}') as import('../src/index.js').SandboxRunReport;
    assert.deepEqual(
      report.files?.map((f) => [f.path, f.text?.length ?? null, f.note ?? null]),
      [
        ['chart.png', null, 'shown to you as an image'],
        ['data.bin', null, 'binary content, not shown'],
        ['long.txt', 8000, 'only its first 8000 of 9000 characters are shown; read the rest with a run'],
        ['notes.md', 6, null],
        ['huge.csv', null, 'content not returned: over budget'],
      ],
    );
    assert.equal(report.files_omitted, 1);
    assert.equal(report.workspace, 'saved');

    assert.equal(runs.length, 1, 'onSandboxRun was called once');
    const got = runs[0];
    assert.equal(got?.toolUseId, 'toolu_files');
    assert.equal(got?.runId, 'r_files');
    assert.deepEqual(got?.files.map((f) => [f.path, f.content?.toString('hex') ?? null, f.omitted ?? null]), [
      ['chart.png', Buffer.from(PNG_1X1, 'base64').toString('hex'), null],
      ['data.bin', '00ff00', null],
      ['long.txt', Buffer.from(longText).toString('hex'), null],
      ['notes.md', Buffer.from('# sum\n').toString('hex'), null],
      ['huge.csv', null, 'over budget'],
    ]);
  } finally {
    await s.cleanup();
  }
});
