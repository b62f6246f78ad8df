import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { PermissionUpdate, Settings } from '@anthropic-ai/claude-agent-sdk';
import { askingShell, isolation, keptPermissionUpdates } from '../src/agent-config.js';
import { GatekeeperConfigError } from '../src/config.js';
import { bashAllowed, checkCallerOptions, configSource, McpSources, sameJson } from '../src/options.js';
import { formatRunResult, outputFence, RunCorrelator, toolUseIdOf } from '../src/sandboxed-code.js';

test('configSource names how each kind of mcpServers entry is configured', () => {
  const cases: { name: string; cfg: unknown; want: string }[] = [
    { name: 'an in-process SDK server', cfg: { type: 'sdk', name: 'x', instance: {} }, want: 'sdk' },
    { name: 'stdio spelled out', cfg: { type: 'stdio', command: 'srv' }, want: 'stdio' },
    { name: 'stdio by default', cfg: { command: 'srv', args: [] }, want: 'stdio' },
    { name: 'sse', cfg: { type: 'sse', url: 'http://h' }, want: 'sse' },
    { name: 'http', cfg: { type: 'http', url: 'http://h' }, want: 'http' },
    { name: 'a type this client does not know', cfg: { type: 'claudeai-proxy', url: 'x' }, want: 'unknown' },
    { name: 'no type and no command', cfg: { url: 'x' }, want: 'unknown' },
    { name: 'not an object', cfg: 'srv', want: 'unknown' },
  ];
  for (const c of cases) assert.equal(configSource(c.cfg), c.want, c.name);
});

test('McpSources reports a server as sdk only when the configuration and the SDK agree', () => {
  const s = new McpSources({ sandboxed_code: { type: 'sdk' }, notes: { type: 'sdk' }, files: { command: 'fs-server' }, web: { type: 'http', url: 'u' }, 'my server': { type: 'sse', url: 'u' } });
  const cases: { name: string; tool: string; prov?: { name: string; source: string }; want: unknown }[] = [
    { name: 'not an MCP tool', tool: 'Read', want: undefined },
    { name: 'our own server, as the SDK reports it', tool: 'mcp__sandboxed_code__run', prov: { name: 'sandboxed_code', source: 'sdk' }, want: { name: 'sandboxed_code', source: 'sdk' } },
    { name: 'a configured server that the SDK says came from user settings is not ours', tool: 'mcp__notes__add', prov: { name: 'notes', source: 'user' }, want: { name: 'notes', source: 'unknown' } },
    { name: 'a stdio server the SDK passed on', tool: 'mcp__files__read', prov: { name: 'files', source: 'dynamic' }, want: { name: 'files', source: 'stdio' } },
    { name: 'the SDK claims sdk for a name we configured as stdio', tool: 'mcp__files__read', prov: { name: 'files', source: 'sdk' }, want: { name: 'files', source: 'unknown' } },
    { name: 'a server nobody configured here', tool: 'mcp__plug__x', prov: { name: 'plug', source: 'plugin' }, want: { name: 'plug', source: 'unknown' } },
    { name: 'no provenance: the tool name prefix finds the config', tool: 'mcp__web__get', want: { name: 'web', source: 'http' } },
    { name: 'no provenance: a normalized name finds its config', tool: 'mcp__my_server__x', want: { name: 'my server', source: 'sse' } },
    { name: 'no provenance and no config', tool: 'mcp__other__x', want: { name: 'other', source: 'unknown' } },
    { name: 'a malformed name has no server', tool: 'mcp____x', want: undefined },
  ];
  for (const c of cases) assert.deepEqual(s.of(c.tool, c.prov), c.want, c.name);
});

test('Bash stays available only when the effective policy allows or asks for it', () => {
  const cases: { name: string; policy: Record<string, unknown> | undefined; want: boolean }[] = [
    { name: 'no policy: the sidecar was unreachable', policy: undefined, want: false },
    { name: 'denied', policy: { tools: { allow: [], ask: [], deny: ['Bash'] } }, want: false },
    { name: 'not listed', policy: { tools: { allow: ['Read'], ask: [], deny: [] } }, want: false },
    { name: 'allowed', policy: { tools: { allow: ['Bash'], ask: [], deny: [] } }, want: true },
    { name: 'asked', policy: { tools: { allow: [], ask: ['Bash'], deny: [] } }, want: true },
    { name: 'allowed and denied: deny wins', policy: { tools: { allow: ['Bash'], ask: [], deny: ['Bash'] } }, want: false },
    { name: 'a malformed tools section', policy: { tools: { allow: 'Bash' } }, want: false },
  ];
  for (const c of cases) assert.equal(bashAllowed(c.policy), c.want, c.name);
});

test('checkCallerOptions accepts ordinary options', () => {
  // A cwd of its own: npm's PATH holds this package's node_modules/.bin, which the PATH check refuses inside a workspace.
  assert.doesNotThrow(() => checkCallerOptions({ cwd: '/nonexistent/ws', permissionMode: 'default', mcpServers: { notes: { command: 'x' } }, settings: { model: 'x' } }));
  assert.throws(() => checkCallerOptions({ mcpServers: { 'sandboxed.code': { command: 'x' } } }), GatekeeperConfigError, 'a name that normalizes to ours');
  assert.throws(() => checkCallerOptions({ settings: { permissions: { defaultMode: 'bypassPermissions' } } }), /bypassPermissions/);
});

test('the run tool finds its tool use id in _meta, else by the input gatekeeper allowed', () => {
  assert.equal(toolUseIdOf({ _meta: { 'claudecode/toolUseId': 'toolu_1', progressToken: 2 } }), 'toolu_1');
  assert.equal(toolUseIdOf({ _meta: {} }), undefined);
  assert.equal(toolUseIdOf(undefined), undefined);
  const runs = new RunCorrelator();
  runs.allowed('toolu_a', { language: 'python', code: 'print(1)' });
  runs.allowed('toolu_b', { code: 'print(1)', language: 'python' });
  runs.allowed('toolu_c', { language: 'sh', code: 'ls', files: { b: '2', a: '1' } });
  assert.equal(runs.take({ language: 'sh', code: 'ls', files: { a: '1', b: '2' } }), 'toolu_c', 'file order does not matter');
  assert.equal(runs.take({ language: 'python', code: 'print(1)' }), 'toolu_a', 'the oldest first');
  runs.consume('toolu_b');
  assert.equal(runs.take({ language: 'python', code: 'print(1)' }), undefined, 'each allow is used once');
  assert.equal(runs.take({ language: 'python', code: 'print(2)' }), undefined, 'an input never allowed has no id');
});

test('a run result reads as text with every flag', () => {
  const text = formatRunResult({ type: 'run_result', id: '1', run_id: 'r', exit_code: 137, reason: 'oom_killed', stdout: '', stderr: 'Killed\n', truncated: false, timed_out: false, oom_killed: true, duration_ms: 40 });
  const fence = outputFence([{ name: 'stderr', text: 'Killed\n' }]);
  assert.match(fence, /^[0-9a-f]{16}$/u);
  assert.equal(
    text,
    [
      'exit code 137 (oom_killed) after 40 ms',
      'note: killed: out of memory',
      'truncated=false timed_out=false oom_killed=true',
      'stdout: (empty)',
      'stderr: below',
      `the program's output follows, each part between a line "<<< ${fence} <part>" and a line ">>> ${fence} <part>"; no output contains ${fence}`,
      `<<< ${fence} stderr`,
      'Killed',
      `>>> ${fence} stderr`,
    ].join('\n'),
  );
});

test('sameJson ignores key order only', () => {
  assert.equal(sameJson({ a: 1, b: { c: 2, d: 3 } }, { b: { d: 3, c: 2 }, a: 1 }), true);
  assert.equal(sameJson({ a: [1, 2] }, { a: [2, 1] }), false);
  assert.equal(sameJson({ file_path: '/a' }, { file_path: '/b' }), false);
});

test('keptPermissionUpdates keeps session updates, drops persisting ones unless trusted, and always drops bypassPermissions', () => {
  const rule = (destination: PermissionUpdate['destination']): PermissionUpdate => ({ type: 'addRules', rules: [{ toolName: 'Write' }], behavior: 'allow', destination });
  const mode = (m: 'bypassPermissions' | 'acceptEdits'): PermissionUpdate => ({ type: 'setMode', mode: m, destination: 'session' });
  const cases: { name: string; u: PermissionUpdate; trust: boolean; kept: boolean }[] = [
    { name: 'a session rule', u: rule('session'), trust: false, kept: true },
    { name: 'a project settings rule', u: rule('projectSettings'), trust: false, kept: false },
    { name: 'a local settings rule', u: rule('localSettings'), trust: false, kept: false },
    { name: 'a user settings rule', u: rule('userSettings'), trust: false, kept: false },
    { name: 'a command-line rule', u: rule('cliArg'), trust: false, kept: false },
    { name: 'a project settings rule, trusted', u: rule('projectSettings'), trust: true, kept: true },
    { name: 'acceptEdits for the session', u: mode('acceptEdits'), trust: false, kept: true },
    { name: 'bypassPermissions for the session', u: mode('bypassPermissions'), trust: false, kept: false },
    { name: 'bypassPermissions, trusted', u: mode('bypassPermissions'), trust: true, kept: false },
  ];
  for (const c of cases) {
    const got = keptPermissionUpdates([c.u], c.trust);
    assert.deepEqual(got, c.kept ? { kept: [c.u], dropped: [] } : { kept: [], dropped: [c.u] }, c.name);
  }
});

test('the shell ask rules are added to the caller\'s permissions in the flag settings and the policy tier, keeping theirs', () => {
  const theirs = { allow: ['Read'], ask: ['WebFetch', 'Bash'] };
  assert.deepEqual(askingShell(theirs), { allow: ['Read'], ask: ['WebFetch', 'Bash', 'PowerShell'] });
  assert.deepEqual(theirs, { allow: ['Read'], ask: ['WebFetch', 'Bash'] }, 'the caller\'s object is left as it was');
  assert.deepEqual(askingShell(undefined), { ask: ['Bash', 'PowerShell'] });
  const o = isolation({ settings: { model: 'm', permissions: { deny: ['WebSearch'] } }, managedSettings: { permissions: { ask: ['Write'] } } }, false);
  assert.deepEqual(o.settings, { autoMemoryEnabled: false, model: 'm', env: { CLAUDE_CODE_DISABLE_CRON: '1' }, permissions: { deny: ['WebSearch'], ask: ['Bash', 'PowerShell'] } });
  const trusted = isolation({ settings: { env: { CLAUDE_CODE_DISABLE_CRON: '', FOO: '1' } } }, true);
  assert.deepEqual((trusted.settings as Settings).env, { CLAUDE_CODE_DISABLE_CRON: '', FOO: '1' }, 'a trusted caller\'s own env wins');
  assert.deepEqual(o.managedSettings, { permissions: { ask: ['Write', 'Bash', 'PowerShell'] }, allowManagedHooksOnly: true });
  const file = isolation({ settings: '/etc/agent/settings.json' }, true);
  assert.equal(file.settings, undefined, 'a settings file path is left to the caller');
  assert.deepEqual(file.managedSettings, { permissions: { ask: ['Bash', 'PowerShell'] } });
});
