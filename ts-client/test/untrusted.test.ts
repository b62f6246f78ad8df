// Pins this client's quoting of model-controlled names to gatekeeper's Go
// package internal/untrusted, and its formatRunResult and runReport to
// `gatekeeper mcp`'s, with the files both languages' tests read:
// internal/untrusted/testdata (quote.json: cases; unsafe.json: every unsafe
// code point, written by `go test ./internal/untrusted -update`) and
// gate/client/claudecode/testdata/run-results (a run_result, the text and the
// structuredContent the model reads).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { firstAbsent, formatRunResult, runReport } from '../src/sandboxed-code.js';
import type { RunResultReply } from '../src/protocol.js';
import { isUnsafe, quote } from '../src/untrusted.js';

/** The repository, from build/test/ up. */
const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

test('quote writes every shared case as the Go side does', () => {
  const cases = JSON.parse(readFileSync(join(REPO, 'internal/untrusted/testdata/quote.json'), 'utf8')) as { name: string; in: string; quoted: string }[];
  assert.ok(cases.length >= 10, `only ${String(cases.length)} cases`);
  for (const c of cases) {
    assert.equal(quote(c.in), c.quoted, c.name);
    assert.equal(JSON.parse(quote(c.in)), c.in, `${c.name}: the quoted name reads back as JSON`);
  }
});

test('the unsafe characters are the Go side’s, over every code point', () => {
  const want = JSON.parse(readFileSync(join(REPO, 'internal/untrusted/testdata/unsafe.json'), 'utf8')) as [number, number][];
  const got: [number, number][] = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    // A Go string cannot hold a lone surrogate (it decodes as U+FFFD); this side escapes one as well.
    if (cp >= 0xd800 && cp <= 0xdfff) {
      assert.ok(isUnsafe(cp), `lone surrogate U+${cp.toString(16)}`);
      continue;
    }
    if (!isUnsafe(cp)) continue;
    const last = got.at(-1);
    if (last !== undefined && last[1] === cp - 1) last[1] = cp;
    else got.push([cp, cp]);
  }
  assert.deepEqual(got, want);
  assert.equal(quote('a\ud800b'), '"a\\ud800b"', 'a lone surrogate is escaped');
});

test('formatRunResult and runReport match gatekeeper mcp on every shared run result', () => {
  const dir = join(REPO, 'gate/client/claudecode/testdata/run-results');
  const names = readdirSync(dir).filter((n) => n.endsWith('.json'));
  for (const want of ['hostile-names.json', 'printed-fields.json', 'guessed-fence.json']) assert.ok(names.includes(want), `run results: ${names.join(', ')}`);
  for (const n of names) {
    const c = JSON.parse(readFileSync(join(dir, n), 'utf8')) as { run_result: RunResultReply; text: string; structured: unknown };
    assert.equal(formatRunResult(c.run_result), c.text, `${n}: text`);
    assert.deepEqual(JSON.parse(JSON.stringify(runReport(c.run_result))), c.structured, `${n}: structuredContent`);
  }
});

test('no file name adds a line to the text the model reads', () => {
  const c = JSON.parse(readFileSync(join(REPO, 'gate/client/claudecode/testdata/run-results/hostile-names.json'), 'utf8')) as { run_result: RunResultReply };
  const lines = fieldsOf(formatRunResult(c.run_result));
  assert.deepEqual(lines.filter((l) => l.startsWith('stdout')), ['stdout: (empty)']);
  assert.deepEqual(lines.filter((l) => /^(workspace|FORGED|file ok|\(created)/u.test(l)), []);
  assert.equal(lines.filter((l) => l.startsWith('file "')).length, c.run_result.files?.length);
  assert.ok(!/[\u001b\u0007\u009b\u007f\u202e]/u.test(formatRunResult(c.run_result)), 'no escape sequence or bidi control reaches the model');
});

/** fieldsOf is gatekeeper's field lines of a run's text: those before its first fenced part. */
function fieldsOf(text: string): string[] {
  const i = text.indexOf('\n<<< ');
  return (i < 0 ? text : text.slice(0, i)).split(/\r\n|[\n\r\v\f\u0085\u2028\u2029]/u);
}

test('printed output adds no field to the text the model reads', () => {
  const dir = join(REPO, 'gate/client/claudecode/testdata/run-results');
  for (const n of ['printed-fields.json', 'guessed-fence.json']) {
    const r = (JSON.parse(readFileSync(join(dir, n), 'utf8')) as { run_result: RunResultReply }).run_result;
    const text = formatRunResult(r);
    const fields = fieldsOf(text);
    const fence = /no output contains ([0-9a-f]{16})$/u.exec(fields.at(-1) ?? '')?.[1];
    assert.ok(fence !== undefined, `${n}: the last field names the fence`);
    assert.deepEqual(fields.filter((l) => l.startsWith('exit code')), [`exit code ${String(r.exit_code)} (exited) after ${String(r.duration_ms)} ms`], n);
    assert.deepEqual(fields.filter((l) => l.startsWith('tool calls') || l.startsWith('workspace')), r.tool_calls ? [`tool calls: ${String(r.tool_calls)} (each decided by gatekeeper's policy)`] : [], n);
    assert.deepEqual(fields.filter((l) => l.startsWith('stdout') || l.startsWith('stderr')), ['stdout: below', 'stderr: below'], n);
    for (const [name, want] of [['stdout', r.stdout], ['stderr', r.stderr]] as const) {
      const part: string | undefined = text.split(`\n<<< ${fence} ${name}\n`)[1]?.split(`>>> ${fence} ${name}`)[0];
      assert.equal(part, want.endsWith('\n') ? want : `${want}\n`, `${n}: ${name} comes back whole inside its fence`);
    }
  }
});

test('the fence is the first candidate no part contains', () => {
  const candidate = (n: number): string => `fence${String(n)}!`;
  assert.equal(firstAbsent([{ name: 'stdout', text: 'fence1!' }], candidate), 'fence0!');
  assert.equal(firstAbsent([{ name: 'stdout', text: 'x fence0! y' }, { name: 'stderr', text: 'fence1!' }], candidate), 'fence2!');
  assert.equal(firstAbsent([{ name: 'file "fence0!"', text: 'x' }], candidate), 'fence1!');
});

test('a file for the agent reaches the model as a handle, and the model is told whether agent code received it', () => {
  const c = JSON.parse(readFileSync(join(REPO, 'gate/client/claudecode/testdata/run-results/to-agent.json'), 'utf8')) as { run_result: RunResultReply };
  const csv = c.run_result.files?.find((f) => f.path === 'report.csv');
  assert.ok(csv?.base64 !== undefined && csv.to_agent === true);
  const bytes = Buffer.from(csv.base64, 'base64').toString('utf8');
  for (const delivered of [false, true]) {
    const text = formatRunResult(c.run_result, delivered);
    assert.ok(!text.includes(bytes) && !text.includes(csv.base64), 'the content is not in the text');
    const line = fieldsOf(text).find((l) => l.startsWith('file "report.csv"'));
    assert.equal(
      line,
      `file "report.csv" (created, 12 bytes, text/csv; charset=utf-8): kept from you for the agent's code (sha256 ${csv.sha256})${delivered ? '' : ', but no agent code received it: this client passes files to none'}`,
    );
  }
});
