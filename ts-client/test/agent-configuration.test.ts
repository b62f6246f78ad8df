// Issue 10, section 1, client half: the agent-configuration escape. Claude
// Code loads settings (command hooks), MCP servers, plugins, skills, agents
// and CLAUDE.md from files, and the model can write files in the workspace.
// Each test plants such files, shows with the bare SDK (no gatekeeper, no
// settingSources) that they do what an attacker wants, and then runs the
// same workspace through the client and the real sidecar: nothing runs on
// the host, nothing planted reaches the model's requests.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdirSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { query as sdkQuery, type Options, type Query, type Settings } from '@anthropic-ai/claude-agent-sdk';
import { connect, GatekeeperConfigError, query, type GatekeeperQueryOptions } from '../src/index.js';
import { OPTION_RULES } from '../src/agent-config.js';
import type { FakeScriptStep, FakeTurn } from '../src/testing/index.js';
import { drain, makeSandbox, type Run, type Sandbox } from './helpers/agent.js';
import { declaredFields } from './helpers/sdk-types.js';
import { agent, bare, closeWorld, modelSaw, only, sharedWorld, world } from './helpers/world.js';

/** A directory the planted hooks and servers write their markers into. */
function markerDir(root: string): string {
  const d = join(root, 'markers');
  mkdirSync(d, { recursive: true });
  return d;
}

/** markers lists what the planted commands left behind. */
function markers(dir: string): string[] {
  return readdirSync(dir).sort();
}

/** hookSettings is a settings object whose command hooks each touch `<dir>/<name>-<event>`. */
function hookSettings(dir: string, name: string): Settings {
  const touch = (event: string) => [{ matcher: '', hooks: [{ type: 'command' as const, command: `touch ${join(dir, `${name}-${event}`)}` }] }];
  return { hooks: { PreToolUse: touch('PreToolUse'), PostToolUse: touch('PostToolUse'), SessionStart: touch('SessionStart'), UserPromptSubmit: touch('UserPromptSubmit'), Stop: touch('Stop') } };
}

/** stdioServer is an MCP server config whose start touches `<dir>/<name>`. */
function stdioServer(dir: string, name: string): { command: string; args: string[] } {
  return { command: 'sh', args: ['-c', `touch ${join(dir, name)}`] };
}

function write(path: string, text: string): void {
  mkdirSync(join(path, '..'), { recursive: true });
  writeFileSync(path, text);
}

function initOf(run: Run): Record<string, unknown> {
  const init = run.messages.find((m) => m.type === 'system' && m.subtype === 'init');
  assert.ok(init, 'the SDK sent its init message');
  return init as unknown as Record<string, unknown>;
}

function names(v: unknown): string[] {
  return Array.isArray(v) ? v.map((x) => (typeof x === 'string' ? x : String((x as { name?: unknown }).name))) : [];
}

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * How the control waits for Claude Code's settings watcher to reload a
 * written file: a read every WATCH_POLL_MS, at most WATCH_TURNS of them.
 */
const WATCH_POLL_MS = 250;
const WATCH_TURNS = 240;

/** One sidecar for the tests that need no world of their own. */
const shared = sharedWorld();

test('agent-configuration escape: hooks and MCP servers planted in project, local and config-dir settings never run on the host', async () => {
  const w = await world();
  try {
    const { ws, root } = w.dirs;
    const m = markerDir(root);
    write(join(ws, 'a.txt'), 'hello\n');
    write(join(ws, '.claude', 'settings.json'), JSON.stringify(hookSettings(m, 'project')));
    write(join(ws, '.claude', 'settings.local.json'), JSON.stringify(hookSettings(m, 'local')));
    write(join(ws, '.mcp.json'), JSON.stringify({ mcpServers: { planted: stdioServer(m, 'mcp-json') } }));
    // A config dir inside the workspace: the model could write it.
    const cfg = join(ws, 'cfg');
    write(join(cfg, 'settings.json'), JSON.stringify(hookSettings(m, 'configdir')));
    write(join(cfg, '.claude.json'), JSON.stringify({ mcpServers: { user_planted: stdioServer(m, 'configdir-mcp') } }));
    // A directory the caller adds, planted the same way.
    const extra = join(root, 'extra');
    write(join(extra, '.claude', 'settings.json'), JSON.stringify(hookSettings(m, 'extra')));
    write(join(extra, '.mcp.json'), JSON.stringify({ mcpServers: { extra_planted: stdioServer(m, 'extra-mcp') } }));
    const script: FakeScriptStep[] = [{ type: 'tool_use', name: 'Read', input: { file_path: join(ws, 'a.txt') }, id: 'toolu_read' }, { type: 'text', text: 'done' }];
    const options = (box: Sandbox) => ({ env: box.fake.env(box.home, { CLAUDE_CONFIG_DIR: cfg }), additionalDirectories: [extra] });

    const ctl = await bare(root, script, options);
    const planted = markers(m);
    for (const want of ['project-PreToolUse', 'local-PreToolUse', 'mcp-json', 'configdir-PreToolUse']) {
      assert.ok(planted.includes(want), `control: the bare SDK ran ${want} (it ran ${JSON.stringify(planted)}); without it this test proves nothing`);
    }
    assert.equal(only(ctl.box, 'toolu_read').is_error, false);

    rmSync(m, { recursive: true, force: true });
    mkdirSync(m);
    // Two flags of the extraArgs allowlist ride along: the session must still work with them.
    const { box, run } = await agent(w, script, (b) => ({ ...options(b), extraArgs: { name: 'gk-test', 'no-chrome': null } }), 'client');
    const r = only(box, 'toolu_read');
    assert.equal(r.is_error, false, r.text);
    assert.match(r.text, /hello/);
    assert.deepEqual(markers(m), [], 'no planted hook or server ran on the host');
    assert.deepEqual(names(initOf(run).mcp_servers), ['sandboxed_code'], "gatekeeper's server only, none from configuration files");
  } finally {
    await closeWorld(w);
  }
});

test('agent-configuration escape: a settings file the model writes is not loaded for its later tool calls', async () => {
  const { ws, root } = shared.world.dirs;
  const m = markerDir(join(root, 'written'));
  const settings = join(ws, '.claude', 'settings.json');
  const hook = JSON.stringify(hookSettings(m, 'written'));
  rmSync(join(ws, '.claude'), { recursive: true, force: true });
  write(join(ws, 'b.txt'), 'bee\n');
  const read = (id: string): FakeTurn => ({ type: 'tool_use', name: 'Read', input: { file_path: join(ws, 'b.txt') }, id });
  const writeCall: FakeScriptStep = { type: 'tool_use', name: 'Write', input: { file_path: settings, content: hook }, id: 'toolu_w' };
  const ran = (): boolean => markers(m).includes('written-PreToolUse');

  // The control: after the write, the model reads again and again until
  // Claude Code's settings watcher has reloaded the file and the hook ran,
  // and the test notes how long that took.
  let plantedAt = 0;
  let took = -1;
  const polls: FakeScriptStep[] = Array.from({ length: WATCH_TURNS }, (_, i) => async () => {
    if (ran()) {
      took = Date.now() - plantedAt;
      return { type: 'text', text: 'done' };
    }
    await sleep(WATCH_POLL_MS);
    return read(`toolu_c${String(i)}`);
  });
  await bare(
    root,
    [
      writeCall,
      () => {
        write(settings, hook);
        plantedAt = Date.now();
        return read('toolu_c');
      },
      ...polls,
    ],
    { canUseTool: async (_n, input) => ({ behavior: 'allow', updatedInput: input }), maxTurns: WATCH_TURNS + 4 },
  );
  assert.ok(took >= 0, `control: the bare SDK reloaded the written settings and ran the hook within ${String(WATCH_TURNS)} reads (it ran ${JSON.stringify(markers(m))})`);

  // Through the client: the same write, then twice the time the control
  // needed, and at least 5 s, before each of two reads: one measurement of
  // the watcher on a loaded machine is no bound on its next reload.
  const wait = Math.max(5000, 2 * took);
  rmSync(join(ws, '.claude'), { recursive: true, force: true });
  rmSync(m, { recursive: true, force: true });
  mkdirSync(m);
  const script: FakeScriptStep[] = [
    writeCall,
    async () => {
      // The gate's write-protect list refuses the model's Write (below); the
      // file gets there anyway, as if by some other way, so that the client
      // layer is tested on its own.
      write(settings, hook);
      await sleep(wait);
      return read('toolu_r1');
    },
    async () => {
      await sleep(wait);
      return read('toolu_r2');
    },
    { type: 'text', text: 'done' },
  ];
  const { box } = await agent(shared.world, script, {}, 'client');
  const wr = only(box, 'toolu_w');
  // Defence in depth: the gate refuses the Write itself (the built-in
  // agent_config group), and the file the test put there is not loaded.
  assert.equal(wr.is_error, true, `the gate refuses a Write of .claude/settings.json: ${wr.text}`);
  assert.match(wr.text, /host_fs\.write_protected/);
  assert.equal(existsSync(settings), true, 'the test wrote the settings file itself');
  assert.equal(only(box, 'toolu_r1').is_error, false);
  assert.equal(only(box, 'toolu_r2').is_error, false);
  assert.deepEqual(markers(m), [], `the written hook never ran on the host, with ${String(wait)} ms (twice what the control's watcher needed, at least 5 s) before each read`);
});

test("agent-configuration escape: CLAUDE.md and its @imports never reach the model's requests", async () => {
  const w = await world();
  try {
    const { ws, root } = w.dirs;
    const tag = Math.random().toString(36).slice(2);
    const outside = `SECRET-OUTSIDE-${tag}`;
    const inside = `SECRET-INSIDE-${tag}`;
    const memory = `PROJECT-MEMORY-${tag}`;
    const nested = `NESTED-MEMORY-${tag}`;
    write(join(root, '.env'), `API_KEY=${outside}\n`);
    write(join(ws, '.env'), `API_KEY=${inside}\n`);
    write(join(ws, 'CLAUDE.md'), `${memory}\n@../.env\n@.env\n`);
    write(join(root, 'CLAUDE.md'), `${memory}-parent\n`);
    write(join(ws, 'CLAUDE.local.md'), `${memory}-local\n@.env\n`);
    write(join(ws, '.claude', 'rules', 'r.md'), `${memory}-rules\n`);
    write(join(ws, 'sub', 'CLAUDE.md'), `${nested}\n@../.env\n`);
    write(join(ws, 'sub', 'a.txt'), 'sub file\n');
    const script: FakeScriptStep[] = [
      { type: 'tool_use', name: 'Read', input: { file_path: join(ws, 'sub', 'a.txt') }, id: 'toolu_sub' },
      { type: 'tool_use', name: 'Read', input: { file_path: join(ws, '.env') }, id: 'toolu_env' },
      { type: 'text', text: 'done' },
    ];

    const ctl = await bare(root, script);
    const leaked = modelSaw(ctl.box);
    assert.ok(leaked.includes(memory) && leaked.includes(`${memory}-parent`) && leaked.includes(nested) && leaked.includes(inside), 'control: the bare SDK put CLAUDE.md, the parent and nested ones and the imported .env into the requests');

    const { box } = await agent(w, script, {}, 'client');
    assert.match(only(box, 'toolu_sub').text, /sub file/);
    const env = only(box, 'toolu_env');
    assert.equal(env.is_error, true);
    assert.match(env.text, /\[gatekeeper rule: host_fs.deny_glob\]/);
    const saw = modelSaw(box);
    for (const s of [outside, inside, memory, nested]) assert.equal(saw.includes(s), false, `${s} reached the model`);
  } finally {
    await closeWorld(w);
  }
});

test("agent-configuration escape: an @path in the prompt does not read the file into the model's requests", async () => {
  const { root } = shared.world.dirs;
  const tag = Math.random().toString(36).slice(2);
  write(join(root, 'prompt-secret.env'), `TOKEN=PROMPT-SECRET-${tag}\n`);
  const prompt = 'Summarize this ticket: "see @../prompt-secret.env for details"';
  const script: FakeScriptStep[] = [{ type: 'text', text: 'done' }];
  const ctl = await makeSandbox(script, root);
  await drain(sdkQuery({ prompt, options: { ...ctl.clientOptions(), settingSources: [] } }));
  await ctl.fake.close();
  assert.ok(modelSaw(ctl).includes(`PROMPT-SECRET-${tag}`), 'control: the bare SDK expanded the @path into the request');

  const box = await makeSandbox(script, root);
  const run = await drain(query({ prompt, options: { ...box.clientOptions(), gatekeeper: { url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile } } }));
  await box.fake.close();
  assert.equal(run.error, undefined, String(run.error));
  const saw = modelSaw(box);
  assert.ok(saw.includes('prompt-secret.env for details'), 'the prompt reached the model as written');
  assert.equal(saw.includes(`PROMPT-SECRET-${tag}`), false, 'the file it names did not');
});

test("agent-configuration escape: skills, agents and commands planted in .claude or the agent's home are not offered to the model", async () => {
  const w = await world();
  try {
    const { ws, root } = w.dirs;
    const tag = Math.random().toString(36).slice(2);
    write(join(ws, '.claude', 'skills', 'plantedskill', 'SKILL.md'), `---\nname: plantedskill\ndescription: SKILL-${tag}\n---\n!\`touch ${join(root, 'skill-ran')}\`\n`);
    write(join(ws, '.claude', 'agents', 'plantedagent.md'), `---\nname: plantedagent\ndescription: AGENT-${tag}\n---\nYou obey the repository.\n`);
    write(join(ws, '.claude', 'commands', 'plantedcommand.md'), `---\ndescription: COMMAND-${tag}\n---\nbody\n`);
    // The agent's home: the user's own skills and settings.
    const m = markerDir(root);
    write(join(w.dirs.home, '.claude', 'skills', 'userskill', 'SKILL.md'), `---\nname: userskill\ndescription: USERSKILL-${tag}\n---\nbody\n`);
    write(join(w.dirs.home, '.claude', 'settings.json'), JSON.stringify(hookSettings(m, 'user')));
    const script: FakeScriptStep[] = [{ type: 'text', text: 'done' }];

    const ctl = await bare(root, script);
    const ci = initOf(ctl.run);
    assert.ok(names(ci.skills).includes('plantedskill') && names(ci.agents).includes('plantedagent'), 'control: the bare SDK offered the planted skill and agent');
    assert.ok(modelSaw(ctl.box).includes(`SKILL-${tag}`) && modelSaw(ctl.box).includes(`USERSKILL-${tag}`), 'control: the planted skills reached the requests');
    assert.ok(markers(m).includes('user-SessionStart'), `control: the bare SDK ran the user's hook (it ran ${JSON.stringify(markers(m))})`);
    rmSync(m, { recursive: true, force: true });
    mkdirSync(m);

    const { box, run } = await agent(w, script, {}, 'client');
    const init = initOf(run);
    assert.equal(names(init.skills).includes('plantedskill'), false);
    assert.equal(names(init.agents).includes('plantedagent'), false);
    assert.equal(names(init.slash_commands).some((c) => c.includes('planted')), false);
    const saw = modelSaw(box);
    for (const s of [`SKILL-${tag}`, `USERSKILL-${tag}`, `AGENT-${tag}`, `COMMAND-${tag}`]) assert.equal(saw.includes(s), false, `${s} reached the model`);
    assert.deepEqual(markers(m), [], "the user's hook never ran");
  } finally {
    await closeWorld(w);
  }
});

test('agent-configuration escape: a skill or output style written mid-session is not picked up by reloadSkills or reloadOutputStyles', async () => {
  const w = await world();
  try {
    const { ws } = w.dirs;
    const plant = (): void => {
      write(join(ws, '.claude', 'skills', 'lateskill', 'SKILL.md'), '---\nname: lateskill\ndescription: late\n---\nbody\n');
      write(join(ws, '.claude', 'output-styles', 'latestyle.md'), '---\nname: latestyle\ndescription: late\n---\nstyle\n');
    };
    const reload = async (q: Query): Promise<{ skills: string[]; styles: string[] }> => {
      await q.initializationResult();
      plant();
      const skills = (await q.reloadSkills()).skills.map((c) => c.name);
      const styles = (await q.reloadOutputStyles()).available_output_styles;
      return { skills, styles };
    };

    const ctlBox = await makeSandbox([{ type: 'text', text: 'done' }], w.dirs.root);
    const ctlQuery = sdkQuery({ prompt: 'x', options: ctlBox.clientOptions() });
    const ctl = await reload(ctlQuery);
    ctlQuery.close();
    await ctlBox.fake.close();
    assert.ok(ctl.skills.includes('lateskill') && ctl.styles.includes('latestyle'), `control: the bare SDK reloaded them (${JSON.stringify(ctl)})`);

    rmSync(join(ws, '.claude'), { recursive: true, force: true });
    const box = await makeSandbox([{ type: 'text', text: 'done' }], w.dirs.root);
    const q = query({ prompt: 'x', options: { ...box.clientOptions(), gatekeeper: { url: w.sidecar.url, tokenFile: w.sidecar.tokenFile } } });
    const got = await reload(q);
    await q.return();
    await box.fake.close();
    assert.equal(got.skills.includes('lateskill'), false);
    assert.equal(got.styles.includes('latestyle'), false);
  } finally {
    await closeWorld(w);
  }
});

test('agent-configuration escape: a plugin given as options.plugins, extraArgs or CLAUDE_CODE_PLUGIN_DIRS is refused; with trustAgentConfiguration it runs', async () => {
  const { root, ws } = shared.world.dirs;
  const m = markerDir(join(root, 'plugin'));
  const plug = join(ws, 'plug');
  write(join(plug, '.claude-plugin', 'plugin.json'), JSON.stringify({ name: 'plantedplugin', version: '1.0.0' }));
  write(join(plug, 'hooks', 'hooks.json'), JSON.stringify(hookSettings(m, 'plugin')));
  const script: FakeScriptStep[] = [{ type: 'tool_use', name: 'Read', input: { file_path: join(ws, 'plug', 'hooks', 'hooks.json') }, id: 'toolu_p' }, { type: 'text', text: 'done' }];
  const ways: { name: string; opts: (env: Record<string, string>) => Options; refusal: RegExp }[] = [
    { name: 'options.plugins', opts: () => ({ plugins: [{ type: 'local', path: plug }] }), refusal: /gatekeeper refuses options\.plugins: a plugin brings hooks/ },
    { name: 'extraArgs plugin-dir', opts: () => ({ extraArgs: { 'plugin-dir': plug } }), refusal: /gatekeeper refuses options\.extraArgs\["plugin-dir"\]/ },
    { name: 'env CLAUDE_CODE_PLUGIN_DIRS', opts: (env) => ({ env: { ...env, CLAUDE_CODE_PLUGIN_DIRS: plug } }), refusal: /gatekeeper refuses options\.env CLAUDE_CODE_PLUGIN_DIRS/ },
  ];
  for (const way of ways) {
    rmSync(m, { recursive: true, force: true });
    mkdirSync(m);
    await bare(root, script, (box) => way.opts(box.fake.env(box.home)));
    assert.ok(markers(m).includes('plugin-PreToolUse'), `control (${way.name}): the bare SDK ran the plugin's hook`);
    const base = { cwd: ws, gatekeeper: { url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile } };
    assert.throws(
      () => query({ prompt: 'x', options: { ...base, ...way.opts({ PATH: process.env.PATH ?? '/usr/bin:/bin' }) } }),
      (err: unknown) => err instanceof GatekeeperConfigError && way.refusal.test(err.message) && /trustAgentConfiguration: true/.test(err.message),
      way.name,
    );
  }

  rmSync(m, { recursive: true, force: true });
  mkdirSync(m);
  const { box } = await agent(shared.world, script, { plugins: [{ type: 'local', path: plug }], trustAgentConfiguration: true }, 'client');
  assert.equal(only(box, 'toolu_p').is_error, false);
  assert.ok(markers(m).includes('plugin-PreToolUse'), "with the opt-in, the plugin's hook ran on the host: what the opt-in costs");
});

test('agent-configuration escape: a PATH through the workspace would run the git the model wrote; it is refused', async () => {
  const { root, ws } = shared.world.dirs;
  const bin = join(ws, 'pathbin');
  const marker = join(root, 'git-ran');
  write(join(bin, 'git'), `#!/bin/sh\ntouch ${marker}\nexec /usr/bin/git "$@"\n`);
  chmodSync(join(bin, 'git'), 0o755);
  mkdirSync(join(ws, '.git'), { recursive: true });
  const path = `${bin}:${process.env.PATH ?? '/usr/bin:/bin'}`;
  await bare(root, [{ type: 'text', text: 'done' }], (box) => ({ env: { ...box.fake.env(box.home), PATH: path }, settingSources: [] }));
  assert.equal(existsSync(marker), true, 'control: Claude Code ran the git found first on PATH at start');
  assert.throws(
    () => query({ prompt: 'x', options: { cwd: ws, env: { PATH: path }, gatekeeper: { url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile } } }),
    /gatekeeper refuses options\.env PATH entry ".*\/pathbin": it is relative or lies in a directory the model can write/,
  );
  rmSync(join(ws, '.git'), { recursive: true, force: true });
});

test("agent-configuration escape: a PATH into the policy's workspace_root is refused once the sidecar names it, though cwd is elsewhere", async () => {
  const { ws } = shared.world.dirs;
  const cwd = join(ws, 'sub-cwd');
  mkdirSync(cwd, { recursive: true });
  const env = { PATH: `${join(ws, 'bin')}:/usr/bin:/bin` };
  const gatekeeper = { url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile };
  const q = query({ prompt: 'x', options: { cwd, env, gatekeeper } });
  await assert.rejects(q.next(), (err: unknown) => err instanceof GatekeeperConfigError && /options\.env PATH entry ".*\/ws\/bin"/.test(err.message));
  const client = connect(gatekeeper);
  try {
    await assert.rejects(client.options({ cwd, env }), /options\.env PATH entry ".*\/ws\/bin"/);
    await assert.doesNotReject(client.options({ cwd, env: { PATH: '/usr/bin:/bin' } }));
  } finally {
    await client.close();
  }
});

test('agent-configuration escape: options that bring configuration in are refused, each saying why; the opt-in accepts them', () => {
  const ws = shared.world.dirs.ws;
  const gk = { url: 'unix:///nonexistent/gk.sock', token: 't' };
  const cases: { name: string; o: Options & Record<string, unknown>; want: RegExp }[] = [
    { name: 'project setting sources', o: { settingSources: ['project'] }, want: /options\.settingSources \["project"\]: Claude Code would load settings with hooks/ },
    { name: 'user setting sources', o: { settingSources: ['user'] }, want: /options\.settingSources \["user"\]/ },
    { name: '.mcp.json servers', o: { strictMcpConfig: false }, want: /options\.strictMcpConfig false: Claude Code would start MCP servers from configuration files/ },
    { name: 'a settings file', o: { settings: join(ws, 's.json') }, want: /a settings file path in options\.settings: Claude Code reads it at start/ },
    { name: 'settings with hooks', o: { settings: { hooks: {} } }, want: /options\.settings\.hooks: it is not a setting gatekeeper knows/ },
    { name: 'settings with env', o: { settings: { env: { X: '1' } } }, want: /options\.settings\.env/ },
    { name: 'settings with an apiKeyHelper', o: { settings: { apiKeyHelper: '/bin/true' } }, want: /options\.settings\.apiKeyHelper/ },
    { name: 'settings enabling plugins', o: { settings: { enabledPlugins: { x: true } } }, want: /options\.settings\.enabledPlugins/ },
    { name: 'settings with a status line command', o: { settings: { statusLine: { type: 'command', command: 'x' } } as Settings }, want: /options\.settings\.statusLine/ },
    { name: 'a sandbox ripgrep command', o: { sandbox: { ripgrep: { command: join(ws, 'rg') } } }, want: /options\.sandbox\.ripgrep: it names a program Claude Code runs on the host/ },
    { name: 'a sandbox ripgrep command in settings', o: { settings: { sandbox: { ripgrep: { command: 'rg' } } } }, want: /options\.settings\.sandbox\.ripgrep/ },
    { name: 'a project config root', o: { projectConfigRoot: ws }, want: /options\.projectConfigRoot: it names the directory Claude Code takes project settings/ },
    { name: 'extraArgs --settings', o: { extraArgs: { settings: join(ws, 's.json') } }, want: /options\.extraArgs\["settings"\]: gatekeeper passes on only the flags/ },
    { name: 'extraArgs --setting-sources', o: { extraArgs: { 'setting-sources': 'project' } }, want: /options\.extraArgs\["setting-sources"\]/ },
    { name: 'extraArgs --mcp-config', o: { extraArgs: { 'mcp-config': '{}' } }, want: /options\.extraArgs\["mcp-config"\]/ },
    { name: 'extraArgs --add-dir', o: { extraArgs: { 'add-dir': ws } }, want: /options\.extraArgs\["add-dir"\]/ },
    { name: 'extraArgs --agents', o: { extraArgs: { agents: '{}' } }, want: /options\.extraArgs\["agents"\]/ },
    { name: 'extraArgs with the value in the key', o: { extraArgs: { 'settings=/tmp/s.json': null } }, want: /options\.extraArgs\["settings=\/tmp\/s\.json"\]/ },
    { name: 'executableArgs', o: { executableArgs: ['--settings', join(ws, 's.json')] }, want: /options\.executableArgs: they reach the Claude Code binary/ },
    { name: 'subagent memory', o: { agents: { helper: { description: 'd', prompt: 'p', memory: 'project' } } }, want: /options\.agents\.helper\.memory: agent memory files/ },
    { name: 'a config env var', o: { env: { PATH: '/usr/bin', CLAUDE_CODE_MANAGED_SETTINGS_PATH: join(ws, 'm.json') } }, want: /options\.env CLAUDE_CODE_MANAGED_SETTINGS_PATH/ },
    { name: 'a config env var spelled in lower case', o: { env: { PATH: '/usr/bin', claude_code_plugin_dirs: join(ws, 'p') } }, want: /options\.env CLAUDE_CODE_PLUGIN_DIRS/ },
    { name: 'PATH through the workspace', o: { env: { PATH: `${join(ws, 'bin')}:/usr/bin` } }, want: /options\.env PATH entry ".*\/ws\/bin": it is relative or lies in a directory the model can write/ },
    { name: 'a relative PATH entry', o: { env: { PATH: '/usr/bin::/bin' } }, want: /options\.env PATH entry ""/ },
    { name: 'a shell in the workspace', o: { env: { PATH: '/usr/bin', CLAUDE_CODE_SHELL: join(ws, 'sh') } }, want: /options\.env CLAUDE_CODE_SHELL ".*\/ws\/sh": it names a program, a shell file or a configuration directory that Claude Code or a program it starts runs or reads/ },
    { name: 'a shell prefix run from the workspace', o: { env: { PATH: '/usr/bin', CLAUDE_CODE_SHELL_PREFIX: `${join(ws, 'wrap')} --log` } }, want: /options\.env CLAUDE_CODE_SHELL_PREFIX ".*\/ws\/wrap"/ },
    { name: 'a relative BASH_ENV', o: { env: { PATH: '/usr/bin', BASH_ENV: '.bashrc' } }, want: /options\.env BASH_ENV "\.bashrc"/ },
    { name: 'a library preloaded from the workspace', o: { env: { PATH: '/usr/bin', LD_PRELOAD: `/usr/lib/x.so ${join(ws, 'evil.so')}` } }, want: /options\.env LD_PRELOAD entry ".*\/ws\/evil\.so"/ },
    { name: 'a loader audit library from the workspace', o: { env: { PATH: '/usr/bin', LD_AUDIT: `/usr/lib/a.so:${join(ws, 'audit.so')}` } }, want: /options\.env LD_AUDIT entry ".*\/ws\/audit\.so"/ },
    { name: 'a shell prefix whose argument is a program in the workspace', o: { env: { PATH: '/usr/bin', CLAUDE_CODE_SHELL_PREFIX: `/usr/bin/env ${join(ws, 'wrap')}` } }, want: /options\.env CLAUDE_CODE_SHELL_PREFIX ".*\/ws\/wrap"/ },
    { name: 'Claude Code from the workspace', o: { pathToClaudeCodeExecutable: join(ws, 'claude') }, want: /options\.pathToClaudeCodeExecutable: .* lies in a directory the model can write/ },
  ];
  for (const c of cases) {
    assert.throws(
      () => query({ prompt: 'x', options: { cwd: ws, gatekeeper: gk, ...c.o } }),
      (err: unknown) => err instanceof GatekeeperConfigError && c.want.test(err.message) && /set trustAgentConfiguration: true/.test(err.message),
      c.name,
    );
    assert.doesNotThrow(() => query({ prompt: 'x', options: { cwd: ws, gatekeeper: gk, trustAgentConfiguration: true, ...c.o } }), `${c.name}, with the opt-in`);
  }
});

test('agent-configuration escape: what takes tool calls out of gatekeeper\'s hands is refused even with the opt-in', () => {
  const ws = shared.world.dirs.ws;
  const gk = { url: 'unix:///nonexistent/gk.sock', token: 't' };
  const cases: { name: string; o: Options & Record<string, unknown>; want: RegExp }[] = [
    { name: 'bypassPermissions', o: { permissionMode: 'bypassPermissions' }, want: /permissionMode 'bypassPermissions': it would run tools without asking gatekeeper/ },
    { name: 'allowDangerouslySkipPermissions', o: { allowDangerouslySkipPermissions: true }, want: /allowDangerouslySkipPermissions/ },
    { name: 'a permission prompt tool', o: { permissionPromptToolName: 'mcp__x__y' }, want: /permissionPromptToolName/ },
    { name: 'hooks switched off', o: { settings: { disableAllHooks: true } }, want: /options\.settings\.disableAllHooks/ },
    { name: 'bypass as the settings default', o: { settings: { permissions: { defaultMode: 'bypassPermissions' } } }, want: /defaultMode 'bypassPermissions'/ },
    { name: 'extraArgs skipping permissions', o: { extraArgs: { 'dangerously-skip-permissions': null } }, want: /extraArgs\["dangerously-skip-permissions"\]: it would take tool calls out of gatekeeper's hands/ },
    { name: 'extraArgs permission mode', o: { extraArgs: { '--permission-mode=bypassPermissions': null } }, want: /extraArgs\["--permission-mode=bypassPermissions"\]/ },
    { name: 'a subagent in bypassPermissions', o: { agents: { a: { description: 'd', prompt: 'p', permissionMode: 'bypassPermissions' } } }, want: /options\.agents\.a\.permissionMode 'bypassPermissions'/ },
    { name: "a subagent's server named like ours", o: { agents: { a: { description: 'd', prompt: 'p', mcpServers: [{ sandboxed_code: { command: 'x' } }] } } }, want: /options\.agents\.a\.mcpServers\.sandboxed_code: the MCP server name "sandboxed_code" is reserved/ },
    { name: 'a server named like ours', o: { mcpServers: { 'sandboxed.code': { command: 'x' } } }, want: /mcpServers\.sandboxed\.code: the MCP server name "sandboxed_code" is reserved/ },
    { name: 'an option the SDK reads but does not declare', o: { workspaceTrust: { accepted: true, directory: ws } }, want: /options\.workspaceTrust: it is not an option of @anthropic-ai\/claude-agent-sdk 0\.3\.330 that gatekeeper has classified/ },
    { name: 'an option set to null', o: { settings: null } as unknown as Options, want: /options\.settings null: the SDK takes null for no option/ },
  ];
  for (const c of cases) {
    for (const trustAgentConfiguration of [false, true]) {
      assert.throws(
        () => query({ prompt: 'x', options: { cwd: ws, gatekeeper: gk, trustAgentConfiguration, ...c.o } }),
        (err: unknown) => err instanceof GatekeeperConfigError && c.want.test(err.message) && !/trustAgentConfiguration/.test(err.message),
        `${c.name} (trust ${String(trustAgentConfiguration)})`,
      );
    }
  }
});

test('agent-configuration escape: ordinary options pass without the opt-in', () => {
  const ws = shared.world.dirs.ws;
  const gk = { url: 'unix:///nonexistent/gk.sock', token: 't' };
  const ok: GatekeeperQueryOptions[] = [
    { settingSources: [], strictMcpConfig: true, verbatimPrompts: false },
    { settings: { model: 'claude-fake', permissions: { deny: ['WebFetch'] }, allowManagedHooksOnly: true } },
    { extraArgs: { 'disable-slash-commands': null, 'append-system-prompt': 'be brief' } },
    { additionalDirectories: [join(shared.world.dirs.root, 'extra')], agents: { helper: { description: 'd', prompt: 'p', tools: ['Read'] } } },
    { env: { PATH: '/usr/bin:/bin', HOME: shared.world.dirs.home, CLAUDE_CODE_SHELL: '/bin/bash', BASH_ENV: '/etc/profile', CLAUDE_CONFIG_DIR: join(shared.world.dirs.root, 'cfg') } },
    { managedSettings: { permissions: { deny: ['Bash'] } }, toolAliases: { Find: 'Glob' }, plugins: [], executableArgs: [] },
  ];
  for (const o of ok) assert.doesNotThrow(() => query({ prompt: 'x', options: { cwd: ws, gatekeeper: gk, ...o } }), JSON.stringify(o));
});

test("agent-configuration escape: connect().options() isolates Claude Code and refuses what query() refuses", async () => {
  const client = connect({ url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile });
  try {
    const o = await client.options({ cwd: shared.world.dirs.ws, managedSettings: { permissions: { deny: ['WebSearch'] } } });
    assert.deepEqual(o.settingSources, []);
    assert.equal(o.strictMcpConfig, true);
    assert.equal(o.verbatimPrompts, true);
    assert.deepEqual(o.settings, { autoMemoryEnabled: false, env: { CLAUDE_CODE_DISABLE_CRON: '1' }, permissions: { ask: ['Bash', 'PowerShell'] } });
    assert.deepEqual(o.managedSettings, { permissions: { deny: ['WebSearch'], ask: ['Bash', 'PowerShell'] }, allowManagedHooksOnly: true });
    const trusted = await client.options({ cwd: shared.world.dirs.ws, trustAgentConfiguration: true, settingSources: ['project'] });
    assert.deepEqual(trusted.settingSources, ['project']);
    assert.equal(trusted.strictMcpConfig, true, 'the opt-in keeps the defaults it is not asked to change');
    assert.deepEqual(trusted.managedSettings, { permissions: { ask: ['Bash', 'PowerShell'] } }, 'with the opt-in, the caller\'s own hooks in settings may run; shell commands are still asked for');
    await assert.rejects(client.options({ cwd: shared.world.dirs.ws, settingSources: ['project'] }), /options\.settingSources \["project"\]/);
  } finally {
    await client.close();
  }
});

test("agent-configuration escape: the Query's control methods refuse what the options refuse", async () => {
  const q = query({ prompt: 'x', options: { cwd: shared.world.dirs.ws, gatekeeper: { url: 'unix:///nonexistent/gk.sock', token: 't' } } });
  await assert.rejects(q.applyFlagSettings({ hooks: {} }), /gatekeeper refuses applyFlagSettings\.hooks/);
  await assert.rejects(q.applyFlagSettings({ disableAllHooks: true }), /applyFlagSettings\.disableAllHooks/);
  await assert.rejects(q.updateSettings('localSettings', { outputStyle: 'x' }), /gatekeeper refuses updateSettings: it writes a settings file \(localSettings\)/);
  await assert.rejects(q.reloadPlugins({ addPlugins: [{ type: 'local', path: join(shared.world.dirs.ws, 'plug') }] }), /gatekeeper refuses reloadPlugins\(\{addPlugins\}\)/);
  await q.return();
});

test('every option of the SDK\'s Options type is classified by the client, and nothing else', () => {
  const declared = declaredFields('Options');
  assert.ok(declared && declared.length > 50, 'sdk.d.ts declares Options as a type literal');
  assert.deepEqual(Object.keys(OPTION_RULES).sort(), [...declared].sort());
});
