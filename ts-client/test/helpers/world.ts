// A world for the end-to-end tests: a temp tree (a fake HOME with a fake
// ~/.ssh/id_rsa, the workspace, the sidecar's files) and the real
// gatekeeper binary serving it, and one Agent SDK query against it.

import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatekeeperError, query, type GatekeeperQueryOptions } from '../../src/index.js';
import type { FakeScriptStep, FakeToolResult } from '../../src/testing/index.js';
import { drain, makeSandbox, type Run, type Sandbox } from './agent.js';
import { policyYaml, startSidecar, type PolicyParams, type Sidecar } from './sidecar.js';

export const FAKE_KEY = '-----BEGIN OPENSSH PRIVATE KEY-----\nFAKE-KEY-FOR-TESTS\n-----END OPENSSH PRIVATE KEY-----\n';

/** One temp tree per test: home/ (with a fake ~/.ssh/id_rsa), ws/ (the workspace and cwd), the sidecar's files. */
export function tree(): { root: string; home: string; ws: string; gk: string } {
  const root = mkdtempSync(join(tmpdir(), 'gk-it-'));
  const home = join(root, 'home');
  const ws = join(root, 'ws');
  const gk = join(root, 'gk');
  for (const d of [home, join(home, '.ssh'), ws, gk]) mkdirSync(d, { recursive: true });
  writeFileSync(join(home, '.ssh', 'id_rsa'), FAKE_KEY, { mode: 0o600 });
  return { root, home, ws, gk };
}

export interface World {
  dirs: ReturnType<typeof tree>;
  sidecar: Sidecar;
}

export async function world(p: Omit<PolicyParams, 'workspace'> = {}): Promise<World> {
  const dirs = tree();
  const sidecar = await startSidecar({ dir: dirs.gk, home: dirs.home, policy: policyYaml({ workspace: dirs.ws, ...p }) });
  return { dirs, sidecar };
}

export async function agent(w: World, script: FakeScriptStep[], extra: GatekeeperQueryOptions = {}): Promise<{ box: Sandbox; run: Run }> {
  const box = await makeSandbox(script, w.dirs.root);
  const run = await drain(
    query({
      prompt: 'do the task',
      options: { ...box.sdkOptions(), gatekeeper: { url: w.sidecar.url, tokenFile: w.sidecar.tokenFile }, ...extra },
    }),
  );
  await box.fake.close();
  if (run.error !== undefined && !(run.error instanceof GatekeeperError)) {
    throw new Error(`query failed: ${String(run.error)}\nClaude Code stderr:\n${box.stderr.join('')}\nsidecar log:\n${w.sidecar.log()}`);
  }
  return { box, run };
}

export function only(box: Sandbox, id: string): FakeToolResult {
  const r = box.fake.toolResult(id);
  assert.ok(r, `the SDK sent no tool_result for ${id}; tool results: ${JSON.stringify(box.fake.toolResults())}`);
  if (process.env.GK_DEBUG_RESULTS) process.stderr.write(`RESULT ${id} ${JSON.stringify(r.text)} ${String(r.is_error)}\n`);
  return r;
}

