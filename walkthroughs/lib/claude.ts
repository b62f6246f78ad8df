// Claude Code's CLI under gatekeeper: installs the managed settings with the
// real `gatekeeper claude-code install` into a world's temp tree, and runs
// the real `claude -p` (the pinned @anthropic-ai/claude-code) against the
// loopback fake model, with that directory mounted at /etc/claude-code in a
// private mount namespace (lib/with-managed-settings.sh; needs root).

import { execFileSync, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmodSync, copyFileSync, existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { createRequire } from 'node:module';
import { connect } from 'node:net';
import { dirname, join } from 'node:path';
import { startFakeModel, type FakeModel, type FakeScriptStep } from '@gatekeeper/client/testing';
import { GATEKEEPER_BIN, REPO, type World } from './world.js';

const require = createRequire(import.meta.url);

/** CLAUDE_BIN is the pinned CLI's native binary (walkthroughs/package.json). */
export const CLAUDE_BIN = join(dirname(require.resolve('@anthropic-ai/claude-code/package.json')), 'bin', 'claude.exe');

/** CLAUDE_VERSION is the pinned CLI's version. */
export const CLAUDE_VERSION = (JSON.parse(readFileSync(require.resolve('@anthropic-ai/claude-code/package.json'), 'utf8')) as { version: string }).version;

/** The helper that mounts a directory at /etc/claude-code for one command. */
export const WITH_MANAGED = join(REPO, 'walkthroughs', 'lib', 'with-managed-settings.sh');

/** HookKind is how the CLI reaches the sidecar: `gatekeeper hook` per call, or an HTTP hook. */
export type HookKind = 'command' | 'http';

/** InstallOptions configure install. */
export interface InstallOptions {
  hook: HookKind;
  /** Seconds the CLI waits for one hook call (default 30). */
  hookTimeout?: number;
  /** Where to install (default <world root>/managed-<hook>). */
  dir?: string;
}

/**
 * secureBinary returns a copy of GATEKEEPER_BIN where only root can replace
 * it, as the docs tell an operator to put it (`sudo install -o root -m 0755
 * bin/gatekeeper /usr/local/bin/`): install refuses a binary that another
 * user could replace, and a checkout, such as CI's clone under /tmp, may lie
 * below a directory others can write. The copy is named by its content, in
 * /var/lib/gatekeeper (root's, 0755), and made once.
 */
export function secureBinary(): string {
  const sum = createHash('sha256').update(readFileSync(GATEKEEPER_BIN)).digest('hex').slice(0, 16);
  const dir = join('/var/lib/gatekeeper', 'walkthroughs-bin', sum);
  const bin = join(dir, 'gatekeeper');
  if (!existsSync(bin)) {
    mkdirSync(dir, { recursive: true, mode: 0o755 });
    for (let d = dir; d !== '/var/lib'; d = dirname(d)) chmodSync(d, 0o755);
    const tmp = `${bin}.${process.pid}`;
    copyFileSync(GATEKEEPER_BIN, tmp);
    chmodSync(tmp, 0o755);
    renameSync(tmp, bin);
  }
  return bin;
}

/**
 * install runs `gatekeeper claude-code install` for world w into a directory
 * of its tree and returns the directory. An HTTP hook needs a world started
 * with hookListen.
 */
export function install(w: World, o: InstallOptions): string {
  const dir = o.dir ?? join(w.dirs.root, `managed-${o.hook}`);
  const args = ['claude-code', 'install', '--path', dir, '--hook', o.hook, '--url', w.url, '--token-file', w.tokenFile, '--gatekeeper', secureBinary()];
  if (o.hook === 'http') {
    if (w.hookUrl === undefined) throw new Error('an HTTP hook needs a world started with hookListen');
    args.push('--hook-url', w.hookUrl);
  }
  if (o.hookTimeout !== undefined) args.push('--hook-timeout', String(o.hookTimeout));
  execFileSync(GATEKEEPER_BIN, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
  return dir;
}

/** ClaudeOptions configure runClaude. */
export interface ClaudeOptions {
  /** The managed settings directory (from install). */
  managed: string;
  /** The fake model's turns. */
  script: FakeScriptStep[];
  /** The CLI's working directory (default the world's workspace). */
  cwd?: string;
  /** --dangerously-skip-permissions (with IS_SANDBOX=1: the tests run as root). */
  bypass?: boolean;
  /** Extra CLI arguments, after `-p PROMPT`. */
  args?: string[];
  /** Extra environment (on top of the fake model's, HOME and, for HTTP hooks, GATEKEEPER_TOKEN). */
  env?: Record<string, string>;
  /** The prompt (default "go"). */
  prompt?: string;
  /** Bound on the run, ms (default 120 s). */
  timeoutMs?: number;
}

/** ClaudeRun is what runClaude returns. */
export interface ClaudeRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The fake model, closed: its requests and the tool results it got. */
  fake: FakeModel;
}

/**
 * runClaude runs `claude -p` once against a fresh fake model playing
 * script, with world w's fake HOME, and the token in GATEKEEPER_TOKEN for
 * an HTTP hook's header. It resolves when the CLI exits.
 */
export async function runClaude(w: World, o: ClaudeOptions): Promise<ClaudeRun> {
  if (!existsSync(CLAUDE_BIN)) throw new Error(`the Claude Code CLI ${CLAUDE_BIN} is not installed: run npm ci in walkthroughs/`);
  const fake = await startFakeModel({ script: o.script });
  const env = fake.env(w.dirs.home, { GATEKEEPER_TOKEN: w.token(), ...(o.bypass === true ? { IS_SANDBOX: '1' } : {}), ...o.env });
  const args = [o.managed, CLAUDE_BIN, '-p', o.prompt ?? 'go', ...(o.bypass === true ? ['--dangerously-skip-permissions'] : []), ...(o.args ?? [])];
  const cwd = o.cwd ?? w.dirs.ws;
  mkdirSync(cwd, { recursive: true });
  const child = spawn(WITH_MANAGED, args, { cwd, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let stdout = '';
  let stderr = '';
  child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
  child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
  const limit = o.timeoutMs ?? 120_000;
  const code = await new Promise<number | null>((resolve) => {
    const timer = setTimeout(() => {
      stderr += `\n(runClaude: killed after ${String(limit / 1000)} s)`;
      child.kill('SIGKILL');
    }, limit);
    child.on('exit', (c) => {
      clearTimeout(timer);
      resolve(c);
    });
  });
  await fake.close();
  return { code, stdout, stderr, fake };
}

/**
 * toolsOfFirstTurn lists the tools of the CLI's first model request: every
 * tool in its tools array, and the tools its system context names as
 * deferred behind ToolSearch (their schemas are not sent).
 */
export function toolsOfFirstTurn(fake: FakeModel): { sent: string[]; deferred: string[] } {
  const body = fake.turns[0]?.body as { tools?: { name: string }[]; messages?: unknown } | undefined;
  const sent = (body?.tools ?? []).map((t) => t.name);
  const text = JSON.stringify(body?.messages ?? []);
  const m = /deferred tools are now available via ToolSearch[\s\S]*?before calling them:\\n([\s\S]*?)\\n\\n/.exec(text);
  const deferred = m?.[1] === undefined ? [] : m[1].split('\\n').filter((n) => n !== '');
  return { sent: sent.sort(), deferred: deferred.sort() };
}

/** toolDefinition is the definition of one tool as the model was sent it. */
export function toolDefinition(fake: FakeModel, name: string): unknown {
  const body = fake.turns[0]?.body as { tools?: { name: string }[] } | undefined;
  return body?.tools?.find((t) => t.name === name);
}

/** waitRefused waits until a killed sidecar's socket (and hook port) refuse connections. */
export async function waitRefused(w: World): Promise<void> {
  const refused = (opts: { path: string } | { host: string; port: number }): Promise<boolean> =>
    new Promise((resolve) => {
      const s = connect(opts as never);
      s.once('connect', () => {
        s.destroy();
        resolve(false);
      });
      s.once('error', () => resolve(true));
    });
  const port = w.hookUrl === undefined ? undefined : Number(new URL(w.hookUrl).port);
  for (let i = 0; i < 200; i++) {
    if ((await refused({ path: w.socketPath })) && (port === undefined || (await refused({ host: '127.0.0.1', port })))) return;
    await new Promise((r) => setTimeout(r, 25));
  }
  throw new Error('the killed sidecar still accepts connections');
}
