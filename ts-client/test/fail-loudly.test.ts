// The client fails loudly against the real sidecar: a wrong token (HTTP
// 401) or a sidecar that is gone makes the query's first step throw a
// GatekeeperUnavailableError that names the address and what to check
// (a token file that cannot be read too),
// before Claude Code starts or the model is asked; the right token on the
// same sidecar opens the query (the control). A connection lost mid-query
// fails closed instead, which integration.test.ts covers.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { connect, GatekeeperUnavailableError, query } from '../src/index.js';
import { drain, makeSandbox, spawnWatch } from './helpers/agent.js';
import { sharedWorld } from './helpers/world.js';

const shared = sharedWorld();

/** attempt runs one query with one text turn and says how it ended. */
async function attempt(gatekeeper: { token?: string; tokenFile?: string }): Promise<{ error: unknown; spawned: string[]; modelRequests: number }> {
  const w = shared.world;
  const box = await makeSandbox([{ type: 'text', text: 'hello' }], w.dirs.root);
  const watch = spawnWatch();
  try {
    const run = await drain(
      query({ prompt: 'hi', options: { ...box.sdkOptions(), spawnClaudeCodeProcess: watch.spawnClaudeCodeProcess, gatekeeper: { url: w.sidecar.url, logger: {}, ...gatekeeper } } }),
    );
    return { error: run.error, spawned: watch.spawned, modelRequests: box.fake.requests.filter((r) => r.kind === 'turn').length };
  } finally {
    await box.fake.close();
  }
}

test('the right token opens the query and the model is asked (the control)', async () => {
  const r = await attempt({ tokenFile: shared.world.sidecar.tokenFile });
  assert.equal(r.error, undefined, String(r.error));
  assert.equal(r.spawned.length, 1, 'Claude Code started');
  assert.equal(r.modelRequests, 1);
});

test('a wrong token throws GatekeeperUnavailableError (unauthorized) naming the socket and the token origin; nothing reaches the model', async () => {
  const w = shared.world;
  const r = await attempt({ token: 'not-the-token' });
  assert.ok(r.error instanceof GatekeeperUnavailableError, `a GatekeeperUnavailableError, not ${String(r.error)}`);
  assert.equal(r.error.code, 'unauthorized');
  assert.equal(r.error.url, w.sidecar.url);
  assert.match(r.error.reason, /HTTP 401/);
  assert.ok(r.error.message.includes(`gatekeeper at ${w.sidecar.url} refused the token (HTTP 401)`), r.error.message);
  assert.match(r.error.message, /the token from options\.gatekeeper\.token/);
  assert.match(r.error.message, /--token-file \(default ~\/\.config\/gatekeeper\/token\)/);
  assert.deepEqual(r.spawned, [], 'Claude Code was not started');
  assert.equal(r.modelRequests, 0);
});

test('a token file that does not exist throws GatekeeperUnavailableError (no_token) naming the file', async () => {
  const w = shared.world;
  const missing = `${w.sidecar.tokenFile}.missing`;
  const r = await attempt({ tokenFile: missing });
  assert.ok(r.error instanceof GatekeeperUnavailableError, `a GatekeeperUnavailableError, not ${String(r.error)}`);
  assert.equal(r.error.code, 'no_token');
  assert.ok(r.error.message.includes(`no token to send to ${w.sidecar.url} (cannot read the token file ${missing} (options.gatekeeper.tokenFile): ENOENT`), r.error.message);
  assert.deepEqual(r.spawned, []);
  assert.equal(r.modelRequests, 0);
});

test('connect().options() with a wrong token rejects the same way', async () => {
  const w = shared.world;
  const gk = connect({ url: w.sidecar.url, token: 'not-the-token', logger: {} });
  try {
    await assert.rejects(gk.options({ cwd: w.dirs.ws }), (err: unknown) => err instanceof GatekeeperUnavailableError && err.code === 'unauthorized');
  } finally {
    await gk.close();
  }
});

test('a sidecar that is gone throws GatekeeperUnavailableError (unreachable) naming the socket', async () => {
  const w = shared.world;
  await w.sidecar.kill(); // SIGKILL: the socket file stays, nothing listens on it
  try {
    const r = await attempt({ tokenFile: w.sidecar.tokenFile });
    assert.ok(r.error instanceof GatekeeperUnavailableError, `a GatekeeperUnavailableError, not ${String(r.error)}`);
    assert.equal(r.error.code, 'unreachable');
    assert.match(r.error.reason, /ECONNREFUSED/);
    assert.ok(r.error.message.includes(`gatekeeper is not reachable at ${w.sidecar.url} (`), r.error.message);
    assert.match(r.error.message, /Check that gatekeeper serve is running/);
    assert.ok(r.error.message.includes(`options.gatekeeper.tokenFile (${w.sidecar.tokenFile})`), r.error.message);
    assert.deepEqual(r.spawned, []);
    assert.equal(r.modelRequests, 0);
  } finally {
    await w.sidecar.restart();
  }
});
