// What the model reads of a run in a session: formatRunResult's line for a
// lost state (fresh: this run started afresh; not fresh: the next one
// will), and runReport's state_lost. A run in a session that lost nothing
// reads as a single-use run does. The shared files of
// gate/client/claudecode/testdata/run-results pin the same text to the Go
// renderer (untrusted.test.ts reads them all).

import { test } from 'node:test';
import assert from 'node:assert/strict';
import type { RunResultReply } from '../src/protocol.js';
import { formatRunResult, runReport } from '../src/sandboxed-code.js';

const base: RunResultReply = {
  type: 'run_result',
  id: '4',
  run_id: 'r_1',
  exit_code: 0,
  reason: 'exited',
  stdout: 'ok\n',
  stderr: '',
  truncated: false,
  timed_out: false,
  oom_killed: false,
  duration_ms: 12,
};
const session = { run: 1, started_at: '2026-12-02T05:00:00.000Z', age_ms: 40, idle_ms: 0, restarts: 1, peak_memory_bytes: 0 };
const LOST = "the Python interpreter's variables and imports, background processes, /tmp and /dev/shm";

test('a lost state is one line after the exit fields, before the output, saying what to do', () => {
  const cases: { name: string; r: RunResultReply; want: string }[] = [
    {
      name: 'a fresh session after an expiry: rebuild now',
      r: { ...base, session, state_lost: { reason: 'expired', lost: LOST, fresh: true } },
      want: `state lost (expired): ${LOST}. This run started in a fresh session: rebuild what it needs.`,
    },
    {
      name: 'a run that timed out and took its session with it: the next run starts afresh',
      r: { ...base, exit_code: 137, reason: 'timed_out', timed_out: true, session: { ...session, run: 4, restarts: 0 }, state_lost: { reason: 'timed_out', lost: LOST, fresh: false } },
      want: `state lost (timed_out): ${LOST}. The next run starts in a fresh session.`,
    },
  ];
  for (const c of cases) {
    const lines = formatRunResult(c.r).split('\n');
    const at = lines.indexOf(c.want);
    assert.ok(at > 0, `${c.name}: no line ${JSON.stringify(c.want)} in\n${lines.join('\n')}`);
    assert.match(lines[at - 1] ?? '', /^truncated=/u, `${c.name}: it follows the exit fields`);
    assert.match(lines[at + 1] ?? '', /^stdout: /u, `${c.name}: the output's fields follow it`);
    assert.equal(lines.filter((l) => l.startsWith('state lost')).length, 1, `${c.name}: one line`);
  }
});

test('a run in a session that lost nothing reads as a single-use run', () => {
  assert.equal(formatRunResult({ ...base, session: { ...session, run: 3, restarts: 0 } }), formatRunResult(base));
  assert.deepEqual(runReport({ ...base, session }), runReport(base), 'the model is not given the session\'s figures');
  assert.ok(!formatRunResult(base).includes('state lost'));
});

test('the model\'s report carries state_lost with its three fields, and nothing else of the wire\'s object', () => {
  const lost = { reason: 'oom_killed', lost: LOST, fresh: false, extra: 'a newer sidecar\'s field' };
  const report = runReport({ ...base, session, state_lost: lost });
  assert.deepEqual(report.state_lost, { reason: 'oom_killed', lost: LOST, fresh: false });
  assert.equal(runReport(base).state_lost, undefined);
});
