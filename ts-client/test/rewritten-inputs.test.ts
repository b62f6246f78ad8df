// Issue 10, section 2: every way a caller (or the SDK) can change a tool's
// input after gatekeeper decided. Claude Code applies an updatedInput from a
// PreToolUse hook, from canUseTool, and from a PermissionRequest hook, which
// it asks at the same time as canUseTool and takes whichever answers first
// (measured: a canUseTool slower than the hook loses, which is why the issue
// saw it once). Each test moves a Write from inside the workspace to outside
// it, shows with the bare SDK that the file lands outside, and then through
// the client and the real sidecar: the new input is decided again, denied
// with the rule, and nothing lands; a move inside the workspace is allowed
// and lands where it was moved.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync, readFileSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import type { CanUseTool, HookCallback, Options, PermissionUpdate } from '@anthropic-ai/claude-agent-sdk';
import type { GatekeeperQueryOptions } from '../src/index.js';
import type { FakeScriptStep } from '../src/testing/index.js';
import { readAudit } from './helpers/sidecar.js';
import { agent, bare, only, sharedWorld } from './helpers/world.js';

const shared = sharedWorld();

/** decisionsOn lists the sidecar's decisions on a Write to `path`, as [event, decision, rule]. */
function decisionsOn(path: string): string[][] {
  return readAudit(shared.world.sidecar.auditLog)
    .filter((a) => a.kind === 'decision' && a.tool === 'Write' && a.tool_input?.file_path === path)
    .map((a) => [a.event ?? '', a.decision ?? '', a.rule ?? '']);
}

/**
 * The files of one test: two Writes the model asks for inside the
 * workspace; a rewrite moves the first outside and the second to another
 * place inside.
 */
function paths(name: string): { first: string; second: string; outside: string; moved: string } {
  const { ws, root } = shared.world.dirs;
  return { first: join(ws, `${name}-1.txt`), second: join(ws, `${name}-2.txt`), outside: join(root, `${name}-outside.txt`), moved: join(ws, `${name}-moved.txt`) };
}

function script(p: ReturnType<typeof paths>): FakeScriptStep[] {
  return [
    { type: 'tool_use', name: 'Write', input: { file_path: p.first, content: 'one' }, id: 'toolu_first' },
    { type: 'tool_use', name: 'Write', input: { file_path: p.second, content: 'two' }, id: 'toolu_second' },
    { type: 'text', text: 'done' },
  ];
}

/** rewrite is the rewritten input for a Write the model asked for. */
function rewrite(p: ReturnType<typeof paths>, input: unknown): Record<string, unknown> {
  const path = (input as { file_path?: unknown }).file_path;
  return { file_path: path === p.first ? p.outside : p.moved, content: 'rewritten' };
}

/**
 * A human answering a prompt: slower than any hook, and gone when Claude
 * Code withdraws the prompt because a hook answered it.
 */
const slowHuman: CanUseTool = async (_name, input, { signal }) => {
  await new Promise<void>((resolve) => {
    const t = setTimeout(resolve, 10_000);
    signal.addEventListener('abort', () => {
      clearTimeout(t);
      resolve();
    });
  });
  return { behavior: 'allow', updatedInput: input };
};

/** The assertions every rewrite test shares, after the run through the client. */
function assertRedecided(box: Parameters<typeof only>[0], p: ReturnType<typeof paths>, event: string): void {
  const first = only(box, 'toolu_first');
  assert.equal(first.is_error, true, first.text);
  assert.match(first.text, /outside the workspace .*\[gatekeeper rule: host_fs.outside_workspace\]/);
  assert.equal(existsSync(p.outside), false, 'nothing landed outside the workspace');
  assert.equal(existsSync(p.first), false, 'nor where the model asked');
  assert.deepEqual(decisionsOn(p.outside), [[event, 'deny', 'host_fs.outside_workspace']], 'the sidecar decided the rewritten input');
  const second = only(box, 'toolu_second');
  assert.equal(second.is_error, false, second.text);
  assert.equal(readFileSync(p.moved, 'utf8'), 'rewritten', 'a rewrite the policy allows lands where it was moved');
  assert.equal(existsSync(p.second), false);
}

test("rewritten input: a caller's PermissionRequest hook that moves a Write is decided again, and a denied move lands nowhere", async () => {
  const control = paths('permreq-bare');
  const moveBare: HookCallback = async (input) =>
    input.hook_event_name === 'PermissionRequest' ? { hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'allow', updatedInput: rewrite(control, input.tool_input) } } } : {};
  await bare(shared.world.dirs.root, script(control), { hooks: { PermissionRequest: [{ hooks: [moveBare] }] }, canUseTool: slowHuman });
  assert.equal(readFileSync(control.outside, 'utf8'), 'rewritten', 'control: with the bare SDK the hook moved the Write outside the workspace');

  const p = paths('permreq');
  const move: HookCallback = async (input) =>
    input.hook_event_name === 'PermissionRequest' ? { hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'allow', updatedInput: rewrite(p, input.tool_input) } } } : {};
  const { box } = await agent(shared.world, script(p), { hooks: { PermissionRequest: [{ hooks: [move] }] }, canUseTool: slowHuman });
  assertRedecided(box, p, 'canUseTool');
});

test("rewritten input: a caller's canUseTool that moves a Write is decided again, and a denied move lands nowhere", async () => {
  const control = paths('cut-bare');
  const moveBare: CanUseTool = async (_n, input) => ({ behavior: 'allow', updatedInput: rewrite(control, input) });
  await bare(shared.world.dirs.root, script(control), { canUseTool: moveBare });
  assert.equal(readFileSync(control.outside, 'utf8'), 'rewritten', 'control: with the bare SDK canUseTool moved the Write outside the workspace');

  const p = paths('cut');
  const move: CanUseTool = async (_n, input) => ({ behavior: 'allow', updatedInput: rewrite(p, input) });
  const { box } = await agent(shared.world, script(p), { canUseTool: move });
  assertRedecided(box, p, 'canUseTool');
});

test("rewritten input: a caller's PreToolUse hook that moves a Write is decided again, and a denied move lands nowhere", async () => {
  const control = paths('pre-bare');
  const moveBare: HookCallback = async (input) =>
    input.hook_event_name === 'PreToolUse' ? { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'allow', updatedInput: rewrite(control, input.tool_input) } } : {};
  await bare(shared.world.dirs.root, script(control), { hooks: { PreToolUse: [{ matcher: 'Write', hooks: [moveBare] }] } });
  assert.equal(readFileSync(control.outside, 'utf8'), 'rewritten', 'control: with the bare SDK the hook moved the Write outside the workspace');

  const p = paths('pre');
  const move: HookCallback = async (input) =>
    input.hook_event_name === 'PreToolUse' ? { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: 'allow', updatedInput: rewrite(p, input.tool_input) } } : {};
  const { box } = await agent(shared.world, script(p), { hooks: { PreToolUse: [{ matcher: 'Write', hooks: [move] }] } });
  assertRedecided(box, p, 'PreToolUse');
});

test('rewritten input: a canUseTool answer sent out of band (null) is a deny, and the query goes on', async () => {
  const p = paths('null');
  const { box, run } = await agent(shared.world, script(p), { canUseTool: async () => null });
  for (const id of ['toolu_first', 'toolu_second']) {
    const r = only(box, id);
    assert.equal(r.is_error, true);
    assert.match(r.text, /answered out of band .* \[gatekeeper rule: client.out_of_band_answer\]/);
  }
  assert.equal(existsSync(p.first), false);
  assert.equal(run.messages.some((m) => m.type === 'result'), true, 'the query ran to its end instead of waiting for an answer');
});

test("permission updates: an 'always allow' a caller would persist writes no settings file, and bypassPermissions is dropped", async () => {
  const { ws, root } = shared.world.dirs;
  const persisted = [join(ws, '.claude', 'settings.json'), join(ws, '.claude', 'settings.local.json')];
  const updates: PermissionUpdate[] = [
    { type: 'addRules', rules: [{ toolName: 'Write' }], behavior: 'allow', destination: 'projectSettings' },
    { type: 'addRules', rules: [{ toolName: 'Write' }], behavior: 'allow', destination: 'localSettings' },
    { type: 'setMode', mode: 'bypassPermissions', destination: 'session' },
    { type: 'addRules', rules: [{ toolName: 'Read' }], behavior: 'allow', destination: 'session' },
  ];
  const always: CanUseTool = async (_n, input) => ({ behavior: 'allow', updatedInput: input, updatedPermissions: updates });
  const alwaysHook: HookCallback = async () => ({ hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'allow', updatedPermissions: updates } } });
  const ways: { name: string; tag: string; opts: Options }[] = [
    { name: 'canUseTool', tag: 'cut', opts: { canUseTool: always } },
    { name: 'a PermissionRequest hook', tag: 'hook', opts: { hooks: { PermissionRequest: [{ hooks: [alwaysHook] }] }, canUseTool: slowHuman } },
  ];
  for (const way of ways) {
    const control = paths(`always-bare-${way.tag}`);
    await bare(root, script(control), way.opts);
    assert.ok(persisted.every((f) => existsSync(f)), `control (${way.name}): the bare SDK wrote the settings files`);
    for (const f of persisted) rmSync(f, { force: true });

    const p = paths(`always-${way.tag}`);
    const warned: Record<string, unknown>[] = [];
    const gatekeeper = { url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile, logger: { warn: (_m: string, f?: Record<string, unknown>) => void warned.push(f ?? {}) } };
    const { box } = await agent(shared.world, script(p), { ...(way.opts as GatekeeperQueryOptions), gatekeeper });
    assert.equal(only(box, 'toolu_first').is_error, false, 'the call itself is allowed');
    assert.equal(existsSync(p.first), true);
    for (const f of persisted) assert.equal(existsSync(f), false, `${way.name}: ${f} was not written`);
    const dropped = warned.flatMap((w) => (Array.isArray(w.dropped) ? (w.dropped as PermissionUpdate[]) : []));
    assert.deepEqual(
      dropped.slice(0, 3).map((u) => (u.type === 'setMode' ? `setMode ${u.mode}` : `${u.type} ${u.destination}`)),
      ['addRules projectSettings', 'addRules localSettings', 'setMode bypassPermissions'],
      `${way.name}: the persisting and the bypass updates were dropped, the session rule kept`,
    );
  }
});

test('rewritten inputs: a canUseTool or PermissionRequest hook that rewrites the input object in place and returns it is decided again', async () => {
  // A caller that normalizes the input it was handed, in place, and returns
  // that object: the returned input and the one gatekeeper decided are then
  // the same object, and only a copy taken before the caller ran shows that
  // it changed.
  const inPlace = (p: ReturnType<typeof paths>, input: Record<string, unknown>): Record<string, unknown> => Object.assign(input, rewrite(p, input));
  const ways: { name: string; tag: string; opts: (p: ReturnType<typeof paths>) => Options }[] = [
    { name: 'canUseTool', tag: 'cut', opts: (p) => ({ canUseTool: async (_n, input) => ({ behavior: 'allow', updatedInput: inPlace(p, input) }) }) },
    {
      name: 'a PermissionRequest hook',
      tag: 'hook',
      opts: (p) => ({
        hooks: {
          PermissionRequest: [
            {
              hooks: [
                async (input) =>
                  input.hook_event_name === 'PermissionRequest'
                    ? { hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'allow', updatedInput: inPlace(p, input.tool_input as Record<string, unknown>) } } }
                    : {},
              ],
            },
          ],
        },
        canUseTool: slowHuman,
      }),
    },
  ];
  for (const way of ways) {
    const control = paths(`inplace-bare-${way.tag}`);
    await bare(shared.world.dirs.root, script(control), way.opts(control));
    assert.equal(readFileSync(control.outside, 'utf8'), 'rewritten', `control (${way.name}): with the bare SDK the in-place rewrite moved the Write outside the workspace`);

    const p = paths(`inplace-${way.tag}`);
    const { box } = await agent(shared.world, script(p), way.opts(p) as GatekeeperQueryOptions);
    assertRedecided(box, p, 'canUseTool');
  }
});
