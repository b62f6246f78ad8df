// Pins this client's copies of declarations whose Go side is the one
// declaration, through files both languages' tests read: the shell tools
// (gate/client/claudecode's ShellTools,
// gate/client/claudecode/testdata/shell-tools.json), the sandbox's server
// and run tool (gate/wire's SandboxServer and SandboxTool,
// gate/wire/testdata/sandbox-tool.json) and the rule's tag in a text the
// model reads (gate/wire's WithRule and RuleTag,
// gate/wire/testdata/rule-text.json). A change on either side fails one of
// the two languages' tests until the file and the other side follow. The
// reasons a session ends are read from their one declaration itself,
// runner.SessionEndReasons in runner/session.go.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { SHELL_TOOLS } from '../src/agent-config.js';
import { RUN_TOOL, SANDBOX_SERVER } from '../src/protocol.js';
import { SANDBOX_DESCRIPTION } from '../src/sandboxed-code.js';
import { forModel } from '../src/options.js';
import { ruleTag, SESSION_END_REASONS, withRule } from '../src/protocol.js';

/** The repository, from build/test/ up. */
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

const shared = (file: string): unknown => JSON.parse(readFileSync(join(REPO, file), 'utf8'));

test('SHELL_TOOLS is the Go side’s list of shell tools, in its order', () => {
  const want = shared('gate/client/claudecode/testdata/shell-tools.json') as string[];
  assert.ok(want.length >= 2, `only ${String(want.length)} shell tools`);
  assert.deepEqual([...SHELL_TOOLS], want);
});

test('SANDBOX_SERVER, RUN_TOOL and SANDBOX_DESCRIPTION are the protocol’s sandbox server, run tool and plain description', () => {
  const want = shared('gate/wire/testdata/sandbox-tool.json') as { server: string; tool: string; description: string };
  assert.deepEqual({ server: SANDBOX_SERVER, tool: RUN_TOOL, description: SANDBOX_DESCRIPTION }, want);
});

test('withRule, ruleTag and forModel write every shared case as the Go side does', () => {
  const cases = shared('gate/wire/testdata/rule-text.json') as { name: string; text: string; rule: string; want: string }[];
  assert.ok(cases.length >= 5, `only ${String(cases.length)} cases`);
  for (const c of cases) {
    assert.equal(withRule(c.text, c.rule), c.want, c.name);
    assert.equal(forModel({ decision: 'deny', reason: c.text, rule: c.rule }), c.want, `${c.name}: forModel`);
    if (c.rule !== '') assert.ok(c.want.endsWith(` ${ruleTag(c.rule)}`), `${c.name}: ends in ruleTag`);
  }
  assert.equal(withRule('x', undefined), 'x', 'a refusal without a rule gets no tag');
});

/**
 * goSessionEndReasons reads runner.SessionEndReasons from its Go source: the
 * values of the constants its body lists, in its order, and the constants
 * of type SessionEndReason the file declares.
 */
function goSessionEndReasons(): { listed: (string | undefined)[]; declared: string[] } {
  const src = readFileSync(join(REPO, 'runner/session.go'), 'utf8');
  const consts = new Map([...src.matchAll(/^\s*(\w+)\s+SessionEndReason\s*=\s*"([^"]*)"/gmu)].map((m) => [m[1] ?? '', m[2] ?? '']));
  const body = /^func SessionEndReasons\(\) \[\]SessionEndReason \{\n([\s\S]*?)\n\}/mu.exec(src)?.[1] ?? '';
  const names = /\[\]SessionEndReason\{([^}]*)\}/u.exec(body)?.[1]?.split(',').map((n) => n.trim()).filter((n) => n !== '') ?? [];
  return { listed: names.map((n) => consts.get(n)), declared: [...consts.values()] };
}

test('SESSION_END_REASONS is runner.SessionEndReasons, every reason the Go side declares, in its order', () => {
  const go = goSessionEndReasons();
  assert.ok(go.listed.length >= 10, `runner.SessionEndReasons lists ${String(go.listed.length)} reasons`);
  assert.deepEqual([...SESSION_END_REASONS], go.listed);
  assert.deepEqual([...SESSION_END_REASONS].sort(), [...go.declared].sort(), 'every SessionEndReason constant is listed');
});
