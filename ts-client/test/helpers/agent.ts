// Runs the real Agent SDK against the loopback fake model, in a temp cwd
// with a fake HOME, so that the machine's own config never takes part.

import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Options, Query, SDKMessage, SpawnedProcess, SpawnOptions } from '@anthropic-ai/claude-agent-sdk';
import { startFakeModel, type FakeModel, type FakeScriptStep } from '../../src/testing/index.js';

export interface Sandbox {
  /** A temp dir holding home/ and ws/. */
  root: string;
  /** The fake HOME of the SDK (and of the sidecar). */
  home: string;
  /** The SDK's cwd, also the policy's workspace_root. */
  ws: string;
  fake: FakeModel;
  /** Options for the SDK: cwd, env, settings isolation, a bounded run. */
  sdkOptions(): Options;
  /** sdkOptions without the settings isolation, left to the client as an agent builder would. */
  clientOptions(): Options;
  /** Claude Code's stderr, for failure messages. */
  stderr: string[];
  cleanup(): Promise<void>;
}

export async function makeSandbox(script: FakeScriptStep[], root?: string): Promise<Sandbox> {
  const dir = root ?? mkdtempSync(join(tmpdir(), 'gk-agent-'));
  const home = join(dir, 'home');
  const ws = join(dir, 'ws');
  mkdirSync(home, { recursive: true });
  mkdirSync(ws, { recursive: true });
  const fake = await startFakeModel({ script });
  const stderr: string[] = [];
  const clientOptions = (): Options => ({
    cwd: ws,
    env: fake.env(home),
    maxTurns: 8,
    stderr: (d: string) => {
      stderr.push(d);
    },
  });
  return {
    root: dir,
    home,
    ws,
    fake,
    stderr,
    clientOptions,
    sdkOptions: () => ({ ...clientOptions(), settingSources: [] }),
    cleanup: async () => {
      await fake.close();
      if (root === undefined) rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface Run {
  messages: SDKMessage[];
  error?: unknown;
}

/** drain iterates a query to its end, bounded by `ms`. */
export async function drain(q: Query, ms = 60_000): Promise<Run> {
  const messages: SDKMessage[] = [];
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`query still running after ${String(ms)} ms`)), ms);
  });
  try {
    await Promise.race([
      (async () => {
        for await (const m of q) messages.push(m);
      })(),
      timeout,
    ]);
    return { messages };
  } catch (error) {
    if (error instanceof Error && error.message.startsWith('query still running')) q.close();
    return { messages, error };
  } finally {
    clearTimeout(timer);
  }
}

/** resultOf returns the final result message of a run. */
export function resultOf(run: Run): SDKMessage | undefined {
  return run.messages.find((m) => m.type === 'result');
}

/** initTools returns the tools the SDK's init message lists. */
export function initTools(run: Run): string[] {
  const init = run.messages.find((m) => m.type === 'system' && m.subtype === 'init');
  return init !== undefined && 'tools' in init ? init.tools : [];
}

/**
 * spawnWatch is a spawnClaudeCodeProcess that starts Claude Code as the SDK
 * would and notes each start: a test that Claude Code never started knows
 * that no request to the model can still come, without waiting for one.
 */
export function spawnWatch(): { spawned: string[]; spawnClaudeCodeProcess: (o: SpawnOptions) => SpawnedProcess } {
  const spawned: string[] = [];
  return {
    spawned,
    spawnClaudeCodeProcess: (o) => {
      spawned.push([o.command, ...o.args].join(' '));
      return spawn(o.command, o.args, { cwd: o.cwd, env: o.env, stdio: ['pipe', 'pipe', 'ignore'] });
    },
  };
}
