// A world for end-to-end tests: a temp tree (home/ with a fake ~/.ssh key,
// ws/ the workspace and cwd, gk/ the sidecar's files), the real gatekeeper
// binary on it, and the real Agent SDK run through the client against the
// loopback fake model.

import assert from 'node:assert/strict';
import { before, after } from 'node:test';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { query as sdkQuery, type Options } from '@anthropic-ai/claude-agent-sdk';
import { GatekeeperError, query, type GatekeeperQueryOptions } from '../../src/index.js';
import type { FakeScriptStep, FakeToolResult } from '../../src/testing/index.js';
import { drain, makeSandbox, type Run, type Sandbox } from './agent.js';
import { policyYaml, startSidecar, type PolicyParams, type Sidecar } from './sidecar.js';

/** The fake private key planted at ~/.ssh/id_rsa. */
export const FAKE_KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-KEY-FOR-TESTS\n-----END OPENSSH PRIVATE KEY-----\n';

/** The directories of one world. */
export interface Tree {
  root: string;
  home: string;
  ws: string;
  gk: string;
}

/** tree makes one temp tree: home/ (with a fake ~/.ssh/id_rsa), ws/ (the workspace and cwd), gk/ (the sidecar's files). */
export function tree(): Tree {
  const root = mkdtempSync(join(tmpdir(), 'gk-it-'));
  const home = join(root, 'home');
  const ws = join(root, 'ws');
  const gk = join(root, 'gk');
  for (const d of [home, join(home, '.ssh'), ws, gk]) mkdirSync(d, { recursive: true });
  writeFileSync(join(home, '.ssh', 'id_rsa'), FAKE_KEY, { mode: 0o600 });
  return { root, home, ws, gk };
}

/** World is a tree with the real sidecar running on it. */
export interface World {
  dirs: Tree;
  sidecar: Sidecar;
}

/** world starts the real sidecar on a fresh tree, with the policy of policyYaml. */
export async function world(p: Omit<PolicyParams, 'workspace'> = {}): Promise<World> {
  const dirs = tree();
  const sidecar = await startSidecar({ dir: dirs.gk, home: dirs.home, policy: policyYaml({ workspace: dirs.ws, ...p }) });
  return { dirs, sidecar };
}

/** closeWorld stops the world's sidecar and removes its tree. */
export async function closeWorld(w: World): Promise<void> {
  await w.sidecar.stop();
  rmSync(w.dirs.root, { recursive: true, force: true });
}

/**
 * sharedWorld starts one world before a test file's tests and stops it (and
 * removes its tree) after them; read it as `shared.world` inside a test.
 */
export function sharedWorld(p: Omit<PolicyParams, 'workspace'> = {}): { readonly world: World } {
  const holder: { world?: World } = {};
  before(async () => {
    holder.world = await world(p);
  });
  after(async () => {
    if (holder.world !== undefined) await closeWorld(holder.world);
  });
  return {
    get world(): World {
      if (holder.world === undefined) throw new Error('the shared world is not started yet');
      return holder.world;
    },
  };
}

/**
 * Which options a run starts from: `sdk` isolates Claude Code itself
 * (settingSources []); `client` leaves that to the client, as an agent
 * builder who never heard of settingSources would.
 */
export type Base = 'sdk' | 'client';

/** Extra options, or a function of the sandbox giving them (for an env built on the fake's). */
export type Extra<O> = O | ((box: Sandbox) => O);

/** agent runs the script through the client against the world's sidecar. */
export async function agent(w: World, script: FakeScriptStep[], extra: Extra<GatekeeperQueryOptions> = {}, base: Base = 'sdk'): Promise<{ box: Sandbox; run: Run }> {
  const box = await makeSandbox(script, w.dirs.root);
  const more = typeof extra === 'function' ? extra(box) : extra;
  const run = await drain(
    query({
      prompt: 'do the task',
      options: { ...(base === 'sdk' ? box.sdkOptions() : box.clientOptions()), gatekeeper: { url: w.sidecar.url, tokenFile: w.sidecar.tokenFile }, ...more },
    }),
  );
  await box.fake.close();
  if (run.error !== undefined && !(run.error instanceof GatekeeperError)) {
    throw new Error(`query failed: ${String(run.error)}\nClaude Code stderr:\n${box.stderr.join('')}\nsidecar log:\n${w.sidecar.log()}`);
  }
  return { box, run };
}

/**
 * bare runs the script through the SDK alone, without gatekeeper, in the
 * same tree: the control that shows what a test's planted files do when
 * nothing stands in the way.
 */
export async function bare(root: string, script: FakeScriptStep[], extra: Extra<Options> = {}): Promise<{ box: Sandbox; run: Run }> {
  const box = await makeSandbox(script, root);
  const more = typeof extra === 'function' ? extra(box) : extra;
  const run = await drain(sdkQuery({ prompt: 'do the task', options: { ...box.clientOptions(), permissionMode: 'default', ...more } }));
  await box.fake.close();
  if (run.error !== undefined) throw new Error(`query failed: ${String(run.error)}\nClaude Code stderr:\n${box.stderr.join('')}`);
  return { box, run };
}

/** only returns the tool_result of one tool use, failing the test when there is none. */
export function only(box: Sandbox, id: string): FakeToolResult {
  const r = box.fake.toolResult(id);
  assert.ok(r, `the SDK sent no tool_result for ${id}; tool results: ${JSON.stringify(box.fake.toolResults())}`);
  if (process.env.GK_DEBUG_RESULTS) process.stderr.write(`RESULT ${id} ${JSON.stringify(r.text)} ${String(r.is_error)}\n`);
  return r;
}

/** modelSaw is every request body the fake model received, as JSON text. */
export function modelSaw(box: Sandbox): string {
  return JSON.stringify(box.fake.requests.map((q) => q.body));
}
