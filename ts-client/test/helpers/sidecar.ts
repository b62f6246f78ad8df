// Starts the real gatekeeper binary (env GATEKEEPER_BIN, default
// <repo>/bin/gatekeeper) on a Unix socket in a temp dir, with a policy the
// test writes, and a fake HOME so that `~` in the policy is the test's.

import { spawn, type ChildProcess } from 'node:child_process';
import { closeSync, existsSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The binary the integration tests run. */
export const GATEKEEPER_BIN = process.env.GATEKEEPER_BIN ?? resolve(dirname(fileURLToPath(import.meta.url)), '../../../../bin/gatekeeper');

export interface Sidecar {
  url: string;
  socketPath: string;
  tokenFile: string;
  auditLog: string;
  /** Where it keeps the queries' workspaces: one directory per query with a workspace. */
  workspaces: string;
  /** Kills the process with SIGKILL, as a crash would. */
  kill(): Promise<void>;
  /** Starts it again on the same socket, token and policy. */
  restart(): Promise<void>;
  /** Stops it (SIGTERM, then SIGKILL); a frozen sidecar is thawed first. */
  stop(): Promise<void>;
  /**
   * Freezes the process with SIGSTOP: its socket stays open and accepts
   * bytes, but nothing is read, decided or answered until thaw().
   */
  freeze(): void;
  /** Lets a frozen process go on (SIGCONT). */
  thaw(): void;
  /** The sidecar's own output so far. */
  log(): string;
}

export interface SidecarOptions {
  /** A temp dir for the socket, token, policy and logs. */
  dir: string;
  /** The policy file's YAML text. */
  policy: string;
  /** HOME of the sidecar process. */
  home: string;
}

/** The knobs of policyYaml. */
export interface PolicyParams {
  workspace: string;
  allow?: string[];
  ask?: string[];
  deny?: string[];
  timeout?: string;
  /** sandbox.fs.image (default "": the default image). */
  image?: string;
  /** sandbox.net.allow; given, the network is on. */
  netAllow?: string[];
  /** YAML appended to the policy: top-level sections such as code_calls. */
  extra?: string;
}

/** policyYaml is the example policy with a few knobs. */
export function policyYaml(p: PolicyParams): string {
  const list = (xs: string[]): string => `[${xs.join(', ')}]`;
  return [
    'version: 1',
    `workspace_root: ${JSON.stringify(p.workspace)}`,
    'tools:',
    `  allow: ${list(p.allow ?? ['Read', 'Write', 'Edit', 'Glob', 'Grep', 'LS', 'mcp__sandboxed_code__run'])}`,
    `  ask: ${list(p.ask ?? [])}`,
    `  deny: ${list(p.deny ?? ['Bash'])}`,
    'sandbox:',
    '  fs:',
    `    image: ${JSON.stringify(p.image ?? '')}`,
    '    workspace: {size: 64m}',
    '    tmp: {size: 64m}',
    '    deny: ["~/.ssh/**", "~/.aws/**", "**/.env", "~/.*"]',
    p.netAllow === undefined ? '  net: {enabled: false, allow: [], deny: []}' : `  net: {enabled: true, allow: ${JSON.stringify(p.netAllow)}, deny: []}`,
    `  proc: {cpus: 1, memory: 256m, pids: 128, timeout: ${p.timeout ?? '10s'}, runtime: runc, user: 65534}`,
    '  output: {max_bytes: 1m}',
    'ceilings: {cpus: 2, memory: 1g, pids: 512, timeout: 120s, net_hosts: [], images: [], runtimes: [runc, runsc]}',
    p.extra ?? '',
  ].join('\n');
}

function healthz(socketPath: string): Promise<number> {
  return new Promise((resolveStatus) => {
    const req = request({ socketPath, path: '/healthz', method: 'GET', timeout: 500 }, (res) => {
      res.resume();
      resolveStatus(res.statusCode ?? 0);
    });
    req.on('error', () => resolveStatus(0));
    req.on('timeout', () => {
      req.destroy();
      resolveStatus(0);
    });
    req.end();
  });
}

/** startSidecar starts the binary, with its Docker runner, and waits for GET /healthz to answer 200. */
/** How many sidecars this test process started: each gets its own instance. */
let sidecarsStarted = 0;

export async function startSidecar(o: SidecarOptions): Promise<Sidecar> {
  if (!existsSync(GATEKEEPER_BIN)) {
    throw new Error(`the gatekeeper binary ${GATEKEEPER_BIN} does not exist: build it (make build, or go build -o bin/gatekeeper ./cmd/gatekeeper) or set GATEKEEPER_BIN`);
  }
  const socketPath = join(o.dir, 'gk.sock');
  const tokenFile = join(o.dir, 'token');
  const policyFile = join(o.dir, 'policy.yaml');
  const auditLog = join(o.dir, 'audit.jsonl');
  const logFile = join(o.dir, 'sidecar.log');
  const stateDir = join(o.dir, 'state');
  // One instance label per sidecar (kept across its restarts): another
  // sidecar's start-up cleanup removes every container of its instance.
  const instance = `ts-${String(process.pid)}-${String(++sidecarsStarted)}`;
  writeFileSync(policyFile, o.policy);
  let child: ChildProcess | undefined;

  const up = async (): Promise<void> => {
    const args = ['serve', '--listen', `unix://${socketPath}`, '--token-file', tokenFile, '--policy', policyFile, '--audit-log', auditLog, '--instance', instance, '--state-dir', stateDir];
    const out = openSync(logFile, 'a');
    const c = spawn(GATEKEEPER_BIN, args, { env: { ...process.env, HOME: o.home }, stdio: ['ignore', out, out] });
    closeSync(out);
    child = c;
    let exited = false;
    c.once('exit', () => {
      exited = true;
    });
    const deadline = Date.now() + 15_000;
    while (Date.now() < deadline) {
      if (exited) throw new Error(`gatekeeper serve exited at start:\n${readFileSync(logFile, 'utf8')}`);
      if ((await healthz(socketPath)) === 200) return;
      await new Promise((r) => setTimeout(r, 50));
    }
    c.kill('SIGKILL');
    throw new Error(`gatekeeper serve not ready within 15 s:\n${readFileSync(logFile, 'utf8')}`);
  };
  const waitExit = (c: ChildProcess | undefined, ms: number): Promise<void> =>
    new Promise((r) => {
      if (c === undefined || c.exitCode !== null || c.signalCode !== null) return r();
      const t = setTimeout(() => {
        c.kill('SIGKILL');
        r();
      }, ms);
      c.once('exit', () => {
        clearTimeout(t);
        r();
      });
    });

  await up();
  return {
    url: `unix://${socketPath}`,
    socketPath,
    tokenFile,
    auditLog,
    workspaces: join(stateDir, 'workspaces', instance),
    kill: async () => {
      const c = child;
      c?.kill('SIGKILL');
      await waitExit(c, 5000);
    },
    restart: up,
    stop: async () => {
      const c = child;
      c?.kill('SIGCONT');
      c?.kill('SIGTERM');
      await waitExit(c, 5000);
    },
    freeze: () => {
      if (child?.kill('SIGSTOP') !== true) throw new Error('gatekeeper serve could not be sent SIGSTOP');
    },
    thaw: () => {
      if (child?.kill('SIGCONT') !== true) throw new Error('gatekeeper serve could not be sent SIGCONT');
    },
    log: () => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : ''),
  };
}

/** AuditRecord is the part of an audit line the tests read. */
export interface AuditRecord {
  kind: string;
  event?: string;
  tool?: string;
  /** The MCP server of a code_call line. */
  server?: string;
  tool_use_id?: string;
  run_id?: string;
  decision?: string;
  rule?: string;
  outcome?: string;
  /** A code_call line's answer to the policy's ask. */
  approval?: { id?: string; by: string; decision: string; message?: string; asked_at: string; answered_at: string; wait_ms: number };
  tool_input?: { file_path?: string };
}

/** readAudit parses a sidecar's audit log, one record per line. */
export function readAudit(file: string): AuditRecord[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l) => JSON.parse(l) as AuditRecord);
}
