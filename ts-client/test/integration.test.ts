// End to end: the real Agent SDK and Claude Code, the real gatekeeper
// binary, and the loopback fake model. HOME is a temp dir (for the SDK and
// the sidecar alike); the real one is never touched.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { createSdkMcpServer, query as sdkQuery, tool, type HookCallback } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import { connect, GatekeeperError, query } from '../src/index.js';
import type { FakeScriptStep } from '../src/testing/index.js';
import { drain, initTools, makeSandbox, spawnWatch } from './helpers/agent.js';
import { readAudit } from './helpers/sidecar.js';
import { agent, closeWorld, only, sharedWorld, world } from './helpers/world.js';
import { resolveConfig } from '../src/config.js';
import { Connection } from '../src/connection.js';
import { SidecarQuery, UNAVAILABLE_RULE } from '../src/session.js';

const RUN = 'mcp__sandboxed_code__run';

/** The common world: the policy, one sidecar for the tests that do not change it. */
const shared = sharedWorld();

test('run: python print("hello") comes back as hello in the tool_result', async () => {
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: RUN, input: { language: 'python', code: 'print("hello")' }, id: 'toolu_py' }, { type: 'text', text: 'done' }]);
  const r = only(box, 'toolu_py');
  assert.equal(r.is_error, false, r.text);
  const out = JSON.parse(r.text) as { stdout: string; exit_code: number; timed_out: boolean };
  assert.equal(out.stdout, 'hello\n');
  assert.equal(out.exit_code, 0);
  assert.equal(out.timed_out, false);
});

test('Bash denied by the policy is left out of the session, and never runs', async () => {
  const marker = join(shared.world.dirs.root, 'bash-marker');
  const { box, run } = await agent(shared.world, [{ type: 'tool_use', name: 'Bash', input: { command: `touch ${marker}` }, id: 'toolu_bash' }, { type: 'text', text: 'done' }]);
  assert.equal(initTools(run).includes('Bash'), false);
  const r = only(box, 'toolu_bash');
  assert.equal(r.is_error, true);
  assert.match(r.text, /No such tool available: Bash/);
  assert.equal(existsSync(marker), false);
});

test('Bash that the policy sends to a human is denied with gatekeeper\'s reason when no one can be asked, and never runs', async () => {
  const w = await world({ ask: ['Bash'], deny: [] });
  try {
    const marker = join(w.dirs.root, 'bash-marker');
    const { box, run } = await agent(w, [{ type: 'tool_use', name: 'Bash', input: { command: `touch ${marker}` }, id: 'toolu_bash' }, { type: 'text', text: 'done' }]);
    assert.equal(initTools(run).includes('Bash'), true, 'a Bash the policy may allow stays available');
    const r = only(box, 'toolu_bash');
    assert.equal(r.is_error, true);
    assert.match(r.text, /tool "Bash" needs a human's approval under the gatekeeper policy \[gatekeeper rule: tools.ask_list\]/);
    assert.equal(existsSync(marker), false);
  } finally {
    await closeWorld(w);
  }
});

test('Read of ~/.ssh/id_rsa is denied with the rule that matched, and the key never reaches the model', async () => {
  const key = join(shared.world.dirs.home, '.ssh', 'id_rsa');
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: 'Read', input: { file_path: key }, id: 'toolu_key' }, { type: 'text', text: 'done' }]);
  const r = only(box, 'toolu_key');
  assert.equal(r.is_error, true);
  assert.match(r.text, /Read of .*\.ssh\/id_rsa is forbidden by the policy's fs.deny pattern .* \[gatekeeper rule: host_fs.deny_glob\]/);
  const everything = JSON.stringify(box.fake.requests.map((q) => q.body));
  assert.equal(everything.includes('FAKE-KEY-FOR-TESTS'), false);
});

test('Write outside the workspace is denied, and the file is not written', async () => {
  const target = join(shared.world.dirs.root, 'outside.txt');
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: 'Write', input: { file_path: target, content: 'pwned' }, id: 'toolu_w' }, { type: 'text', text: 'done' }]);
  const r = only(box, 'toolu_w');
  assert.equal(r.is_error, true);
  assert.match(r.text, /Write of .*outside\.txt is outside the workspace .* \[gatekeeper rule: host_fs.outside_workspace\]/);
  assert.equal(existsSync(target), false);
});

test('a tool the policy does not list is denied, and its handler never runs', async () => {
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
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: 'mcp__notes__add', input: { text: 'hi' }, id: 'toolu_n' }, { type: 'text', text: 'done' }], { mcpServers: { notes } });
  const r = only(box, 'toolu_n');
  assert.equal(r.is_error, true);
  assert.match(r.text, /tool "mcp__notes__add" is not allowlisted by the gatekeeper policy \[gatekeeper rule: tools.not_allowlisted\]/);
  assert.equal(ran, false);
});

test('Read inside the workspace is allowed and the model gets the content', async () => {
  const file = join(shared.world.dirs.ws, 'notes.txt');
  writeFileSync(file, 'the workspace says hi\n');
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: 'Read', input: { file_path: file }, id: 'toolu_r' }, { type: 'text', text: 'done' }]);
  const r = only(box, 'toolu_r');
  assert.equal(r.is_error, false, r.text);
  assert.match(r.text, /the workspace says hi/);
});

test('a rejected override fails the query before any request reaches the model, listing the violations', async () => {
  const box = await makeSandbox([{ type: 'text', text: 'never' }], shared.world.dirs.root);
  const claude = spawnWatch();
  try {
    const run = await drain(
      query({
        prompt: 'hi',
        options: { ...box.sdkOptions(), spawnClaudeCodeProcess: claude.spawnClaudeCodeProcess, gatekeeper: { url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile }, sandboxPolicy: { proc: { memory: '8g', timeout: '10m' } } },
      }),
    );
    assert.ok(run.error instanceof GatekeeperError, String(run.error));
    assert.equal(run.error.code, 'policy_override_rejected');
    assert.ok(run.error.violations.some((v) => /sandbox.proc.memory 8g exceeds ceiling 1g/.test(v)), run.error.violations.join('\n'));
    assert.ok(run.error.violations.some((v) => /timeout/.test(v)), run.error.violations.join('\n'));
    assert.equal(run.messages.length, 0);
    assert.deepEqual(claude.spawned, [], 'Claude Code was never started, so no request can reach the model later');
    assert.equal(box.fake.requests.length, 0, 'no request reached the model');
  } finally {
    await box.fake.close();
  }
});

test('the same prompt with and without a sandboxPolicy: a higher timeout lets a slow script finish', async () => {
  const w = await world({ timeout: '2s' });
  try {
    const script = (id: string): FakeScriptStep[] => [
      { type: 'tool_use', name: RUN, input: { language: 'python', code: 'import time\ntime.sleep(3)\nprint("slept")' }, id },
      { type: 'text', text: 'done' },
    ];
    const base = await agent(w, script('toolu_base'));
    const r1 = only(base.box, 'toolu_base');
    const over = await agent(w, script('toolu_over'), { sandboxPolicy: { proc: { timeout: '10s' } } });
    const r2 = only(over.box, 'toolu_over');
    const o1 = JSON.parse(r1.text) as { timed_out: boolean; stdout: string };
    const o2 = JSON.parse(r2.text) as { timed_out: boolean; stdout: string; exit_code: number };
    assert.equal(o1.timed_out, true, r1.text);
    assert.equal(o2.timed_out, false, r2.text);
    assert.equal(o2.stdout, 'slept\n');
  } finally {
    await closeWorld(w);
  }
});

test('sidecar killed mid-query: the next call is denied as unavailable; restarted on the same socket: calls are decided again', async () => {
  const w = await world();
  try {
    const file = join(w.dirs.ws, 'a.txt');
    writeFileSync(file, 'alive\n');
    const read = (id: string) => ({ type: 'tool_use' as const, name: 'Read', input: { file_path: file }, id });
    const { box } = await agent(w, [
      read('toolu_1'),
      async () => {
        await w.sidecar.kill();
        return read('toolu_2');
      },
      async () => {
        await w.sidecar.restart();
        return read('toolu_3');
      },
      async () => ({ type: 'tool_use', name: 'Read', input: { file_path: join(w.dirs.home, '.ssh', 'id_rsa') }, id: 'toolu_4' }),
      { type: 'text', text: 'done' },
    ]);
    const [r1, r2, r3, r4] = ['toolu_1', 'toolu_2', 'toolu_3', 'toolu_4'].map((id) => only(box, id));
    assert.equal(r1?.is_error, false, r1?.text);
    assert.match(r1?.text ?? '', /alive/);
    assert.equal(r2?.is_error, true);
    assert.match(r2?.text ?? '', /gatekeeper is unavailable \(.*\), so this tool call is denied \[gatekeeper rule: client.gatekeeper_unavailable\]/);
    assert.equal(r3?.is_error, false, r3?.text);
    assert.match(r3?.text ?? '', /alive/);
    assert.equal(r4?.is_error, true, 'after the restart, denies are gatekeeper\'s own again');
    assert.match(r4?.text ?? '', /host_fs.deny_glob/);
  } finally {
    await closeWorld(w);
  }
});

test('sidecar frozen (SIGSTOP) mid-query: a Write and a run get no answer in time, are denied saying so, and neither happens; thawed: the same calls are allowed and happen', async () => {
  const w = await world();
  try {
    const frozen = join(w.dirs.ws, 'while-frozen.txt');
    const thawed = join(w.dirs.ws, 'after-thaw.txt');
    const write = (id: string, file: string) => ({ type: 'tool_use' as const, name: 'Write', input: { file_path: file, content: 'written\n' }, id });
    const run = (id: string) => ({ type: 'tool_use' as const, name: RUN, input: { language: 'python', code: `print("ran ${id}")` }, id });
    const { box } = await agent(w, [
      // The query is open (before the first model request): the connection
      // stands, and the sidecar stops answering on it.
      () => {
        w.sidecar.freeze();
        return write('toolu_fw', frozen);
      },
      run('toolu_fr'),
      () => {
        w.sidecar.thaw();
        return write('toolu_tw', thawed);
      },
      run('toolu_tr'),
      { type: 'text', text: 'done' },
    ]);
    for (const id of ['toolu_fw', 'toolu_fr']) {
      const r = only(box, id);
      assert.equal(r.is_error, true, `${id}: ${r.text}`);
      assert.match(r.text, /gatekeeper is unavailable \(no decision within 2000 ms: .*\), so this tool call is denied \[gatekeeper rule: client.gatekeeper_unavailable\]/, id);
    }
    assert.equal(existsSync(frozen), false, 'the Write denied for want of an answer wrote nothing');
    // The control: the same calls, once the sidecar answers, are allowed and happen.
    const tw = only(box, 'toolu_tw');
    assert.equal(tw.is_error, false, tw.text);
    assert.equal(existsSync(thawed), true, 'control: the thawed sidecar allows the same Write, and it writes');
    const tr = only(box, 'toolu_tr');
    assert.equal(tr.is_error, false, tr.text);
    assert.equal((JSON.parse(tr.text) as { stdout: string }).stdout, 'ran toolu_tr\n', 'control: the thawed sidecar runs the same code');
    // The run after the thaw ended (its record is in the log), and anything
    // the client had sent about toolu_fr was read before it, on the same
    // connection: a run of toolu_fr would have its record by now.
    const runs = readAudit(w.sidecar.auditLog).filter((a) => a.kind === 'run');
    assert.deepEqual(
      runs.map((a) => a.tool_use_id),
      ['toolu_tr'],
      'only the run after the thaw was started: none for the call denied while the sidecar was frozen',
    );
  } finally {
    await closeWorld(w); // thaws it first
  }
});

test("caller hooks compose: the caller's deny beats gatekeeper's allow, the caller's allow does not beat gatekeeper's deny", async () => {
  const file = join(shared.world.dirs.ws, 'c.txt');
  writeFileSync(file, 'caller test\n');
  const key = join(shared.world.dirs.home, '.ssh', 'id_rsa');
  const callerHook: HookCallback = async (input) => {
    if (input.hook_event_name !== 'PreToolUse') return {};
    const path = (input.tool_input as { file_path?: string }).file_path;
    return {
      hookSpecificOutput: {
        hookEventName: 'PreToolUse',
        permissionDecision: path === file ? 'deny' : 'allow',
        permissionDecisionReason: path === file ? 'the caller says no' : 'the caller says yes',
      },
    };
  };
  const { box } = await agent(
    shared.world,
    [
      { type: 'tool_use', name: 'Read', input: { file_path: file }, id: 'toolu_mine' },
      { type: 'tool_use', name: 'Read', input: { file_path: key }, id: 'toolu_key' },
      { type: 'text', text: 'done' },
    ],
    { hooks: { PreToolUse: [{ matcher: 'Read', hooks: [callerHook] }] } },
  );
  const mine = only(box, 'toolu_mine');
  assert.equal(mine.is_error, true);
  assert.match(mine.text, /the caller says no/);
  const k = only(box, 'toolu_key');
  assert.equal(k.is_error, true);
  assert.match(k.text, /host_fs.deny_glob/);
  assert.equal(k.text.includes('FAKE-KEY-FOR-TESTS'), false);
});

test("a caller hook's updatedInput is decided again by gatekeeper", async () => {
  const file = join(shared.world.dirs.ws, 'd.txt');
  writeFileSync(file, 'harmless\n');
  const key = join(shared.world.dirs.home, '.ssh', 'id_rsa');
  const swap: HookCallback = async () => ({
    hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'allow', updatedInput: { file_path: key } },
  });
  const { box } = await agent(shared.world, [{ type: 'tool_use', name: 'Read', input: { file_path: file }, id: 'toolu_swap' }, { type: 'text', text: 'done' }], {
    hooks: { PreToolUse: [{ matcher: 'Read', hooks: [swap] }] },
  });
  const r = only(box, 'toolu_swap');
  assert.equal(r.is_error, true);
  assert.match(r.text, /host_fs.deny_glob/);
  assert.equal(r.text.includes('FAKE-KEY-FOR-TESTS'), false);
});

test("a caller canUseTool composes: its deny wins, its allow does not beat gatekeeper's deny", async () => {
  const inside = join(shared.world.dirs.ws, 'by-caller.txt');
  const outside = join(shared.world.dirs.root, 'outside-2.txt');
  const asked: string[] = [];
  const { box } = await agent(
    shared.world,
    [
      { type: 'tool_use', name: 'Write', input: { file_path: inside, content: 'x' }, id: 'toolu_in' },
      { type: 'tool_use', name: 'Write', input: { file_path: outside, content: 'x' }, id: 'toolu_out' },
      { type: 'text', text: 'done' },
    ],
    {
      canUseTool: async (name, input) => {
        asked.push(`${name} ${String(input.file_path)}`);
        return input.file_path === inside ? { behavior: 'deny', message: 'the caller refuses this write' } : { behavior: 'allow', updatedInput: input };
      },
    },
  );
  assert.match(only(box, 'toolu_in').text, /the caller refuses this write/);
  assert.equal(existsSync(inside), false);
  assert.match(only(box, 'toolu_out').text, /host_fs.outside_workspace/);
  assert.equal(existsSync(outside), false);
  assert.deepEqual(asked, [`Write ${inside}`], 'the caller is not even asked about a call gatekeeper denied');
});

test('the real sidecar refuses a wrong token, and the client fails closed saying so', async () => {
  const conn = new Connection(resolveConfig({ url: shared.world.sidecar.url, token: 'not-the-token', decisionTimeoutMs: 2000 }, {}));
  const sq = new SidecarQuery(conn, undefined);
  try {
    const first = await sq.firstOpen(2000);
    assert.match(first.unavailable ?? '', /HTTP 401/);
    const d = await sq.decide('PreToolUse', 'Read', { file_path: join(shared.world.dirs.ws, 'x') }, 'toolu_tok');
    assert.equal(d.decision, 'deny');
    assert.equal(d.rule, UNAVAILABLE_RULE);
  } finally {
    await sq.close();
    conn.close();
  }
});

test('connect(): options() for a plain SDK query() against the real sidecar', async () => {
  const file = join(shared.world.dirs.ws, 'e.txt');
  writeFileSync(file, 'via connect\n');
  const box = await makeSandbox(
    [
      { type: 'tool_use', name: 'Read', input: { file_path: file }, id: 'toolu_ok' },
      { type: 'tool_use', name: 'Write', input: { file_path: join(shared.world.dirs.root, 'x.txt'), content: 'x' }, id: 'toolu_no' },
      { type: 'text', text: 'done' },
    ],
    shared.world.dirs.root,
  );
  const client = connect({ url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile });
  try {
    const run = await drain(sdkQuery({ prompt: 'go', options: await client.options(box.sdkOptions()) }));
    assert.equal(run.error, undefined, String(run.error));
    assert.match(only(box, 'toolu_ok').text, /via connect/);
    assert.match(only(box, 'toolu_no').text, /host_fs.outside_workspace/);
    await assert.rejects(client.options({ cwd: shared.world.dirs.ws, sandboxPolicy: { proc: { memory: '8g' } } }), (err: unknown) => err instanceof GatekeeperError && err.violations.length > 0);
  } finally {
    await client.close();
    await box.fake.close();
  }
});
