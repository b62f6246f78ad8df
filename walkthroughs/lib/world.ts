// A world for one walkthrough: a temp tree (a fake HOME with a fake SSH key,
// the agent's workspace, the sidecar's files), a policy file written from a
// few knobs, and the real `gatekeeper serve` binary with its Docker runner
// on a Unix socket in that tree. Nothing of the machine's own HOME or
// gatekeeper config takes part.

import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, closeSync, existsSync, mkdirSync, mkdtempSync, openSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { tmpdir } from 'node:os';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { gunzipSync } from 'node:zlib';
import { parse, stringify } from 'yaml';

/** The repository root (this file runs from walkthroughs/build/lib/). */
export const REPO = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * The sandbox backend of the sidecar: env WALKTHROUGH_RUNNER, docker (the
 * default) or kube, the cluster of scripts/ensure-kube, whose
 * `scripts/ensure-kube env` must be in the environment (make
 * walkthroughs-kube does both).
 */
export const RUNNER: 'docker' | 'kube' = process.env.WALKTHROUGH_RUNNER === 'kube' ? 'kube' : 'docker';

/** The sidecar binary: env GATEKEEPER_BIN, default <repo>/bin/gatekeeper. */
export const GATEKEEPER_BIN = process.env.GATEKEEPER_BIN ?? join(REPO, 'bin/gatekeeper');

/** The fake private key planted in the fake HOME; it must never leave it. */
export const FAKE_SSH_KEY_MARKER = 'FAKE-WALKTHROUGH-KEY-7c1e9b';
export const FAKE_SSH_KEY = `-----BEGIN OPENSSH PRIVATE KEY-----\n${FAKE_SSH_KEY_MARKER}\n-----END OPENSSH PRIVATE KEY-----\n`;

/** Policy knobs; everything else is the shipped sandbox.policy.yaml's. */
export interface PolicyParams {
  /** sandbox.fs.image: a profile (python, python-data, node) or an image reference. */
  image?: string;
  /** sandbox.fs.workspace.size. */
  workspaceSize?: string;
  allow?: string[];
  ask?: string[];
  deny?: string[];
  fsDeny?: string[];
  deps?: string;
  tmpSize?: string;
  cpus?: number;
  memory?: string;
  pids?: number;
  timeout?: string;
  runtime?: string;
  outputMaxBytes?: string;
  netEnabled?: boolean;
  netAllow?: string[];
  /** ceilings.net_hosts: hosts an override may enable. */
  netHosts?: string[];
  ceilingTimeout?: string;
  ceilingMemory?: string;
  /** ceilings.images: images an override may choose. */
  ceilingImages?: string[];
  /** mcp_servers: the operator's MCP servers code may call (none in the shipped policy). */
  mcpServers?: Record<string, unknown>;
  /** code_calls: which of their tools code may call, and the bounds. */
  codeCalls?: Record<string, unknown>;
  /** secrets: the credentials code may use but never read (none in the shipped policy). */
  secrets?: Record<string, unknown>;
  /** sandbox.net.inspect: hosts whose requests are each decided by the policy. */
  netInspect?: string[];
  /** sandbox.net.secrets: the secrets every run gets. */
  netSecrets?: string[];
}

/** The parts of sandbox.policy.yaml a world sets (docs/SANDBOX.md has them all). */
interface ShippedPolicy {
  workspace_root: string;
  tools: { allow: string[]; ask: string[]; deny: string[] };
  sandbox: {
    fs: { image: string; workspace: { size: string }; tmp: { size: string }; deps: string; deny: string[] };
    net: { enabled: boolean; allow: string[]; deny: string[]; inspect?: string[]; secrets?: string[] };
    proc: { cpus: number; memory: string; pids: number; timeout: string; runtime: string };
    output: { max_bytes: string };
  };
  ceilings: { memory: string; timeout: string; net_hosts: string[]; images: string[] };
  mcp_servers?: Record<string, unknown>;
  code_calls?: Record<string, unknown>;
  secrets?: Record<string, unknown>;
}

/** shipped reads the shipped policy afresh: every world's policy starts from it. */
function shipped(): ShippedPolicy {
  return parse(readFileSync(join(REPO, 'sandbox.policy.yaml'), 'utf8')) as ShippedPolicy;
}

/** The shipped policy's tools.allow, read from sandbox.policy.yaml. */
export const DEFAULT_ALLOW: readonly string[] = shipped().tools.allow;

/** policyYaml renders a policy file for workspace ws: the shipped policy with the knobs of p. */
export function policyYaml(ws: string, p: PolicyParams): string {
  const doc = shipped();
  const { tools, sandbox: sb, ceilings } = doc;
  doc.workspace_root = ws;
  tools.allow = p.allow ?? tools.allow;
  tools.ask = p.ask ?? tools.ask;
  tools.deny = p.deny ?? tools.deny;
  sb.fs.image = p.image ?? sb.fs.image;
  sb.fs.workspace.size = p.workspaceSize ?? sb.fs.workspace.size;
  sb.fs.tmp.size = p.tmpSize ?? sb.fs.tmp.size;
  sb.fs.deps = p.deps ?? sb.fs.deps;
  sb.fs.deny = p.fsDeny ?? sb.fs.deny;
  sb.net.enabled = p.netEnabled ?? sb.net.enabled;
  sb.net.allow = p.netAllow ?? sb.net.allow;
  if (p.netInspect !== undefined) sb.net.inspect = p.netInspect;
  if (p.netSecrets !== undefined) sb.net.secrets = p.netSecrets;
  sb.proc.cpus = p.cpus ?? sb.proc.cpus;
  sb.proc.memory = p.memory ?? sb.proc.memory;
  sb.proc.pids = p.pids ?? sb.proc.pids;
  sb.proc.timeout = p.timeout ?? sb.proc.timeout;
  sb.proc.runtime = p.runtime ?? sb.proc.runtime;
  sb.output.max_bytes = p.outputMaxBytes ?? sb.output.max_bytes;
  ceilings.memory = p.ceilingMemory ?? ceilings.memory;
  ceilings.timeout = p.ceilingTimeout ?? ceilings.timeout;
  ceilings.net_hosts = p.netHosts ?? ceilings.net_hosts;
  ceilings.images = p.ceilingImages ?? ceilings.images;
  if (p.mcpServers !== undefined) doc.mcp_servers = p.mcpServers;
  if (p.codeCalls !== undefined) doc.code_calls = p.codeCalls;
  if (p.secrets !== undefined) doc.secrets = p.secrets;
  return `# written by walkthroughs/lib/world.ts: sandbox.policy.yaml with the walkthrough's knobs\n${stringify(doc)}`;
}

/** WorldOptions configure startWorld. */
export interface WorldOptions {
  /** The walkthrough's number, for names. */
  n: number;
  policy?: PolicyParams;
  /** Extra environment of the sidecar (on top of PATH, HOME and DOCKER_HOST). */
  env?: Record<string, string>;
  /** Serves the live console (`serve --ui`) on a loopback TCP port the system picks, instead of the Unix socket. */
  ui?: boolean;
  /** Prepares files before the sidecar starts (deps dirs, planted symlinks). */
  prepare?: (w: Dirs) => PolicyParams | void;
  /** Also serve the Claude Code hook endpoint on a loopback TCP port (--hook-listen). */
  hookListen?: boolean;
  /**
   * Use this policy file (such as the shipped sandbox.policy.yaml) instead
   * of one written from the knobs, with its workspace_root set to the
   * world's workspace.
   */
  policyFrom?: string;
  /** Operator Rego modules (file name → text), loaded with serve --rego-dir. */
  rego?: Record<string, string>;
  /** Extra arguments of `gatekeeper serve`. */
  serveArgs?: string[];
}

/** Dirs is the temp tree of a world. */
export interface Dirs {
  /** The temp root holding everything below. */
  root: string;
  /** The fake HOME of the sidecar and the agent, with .ssh/id_rsa. */
  home: string;
  /** The agent's cwd and the policy's workspace_root. */
  ws: string;
  /** The sidecar's socket, token, policy, audit log and log. */
  gk: string;
}

/** World is a running sidecar in its temp tree. */
export interface World {
  dirs: Dirs;
  /** The client's `url` (unix://…, or ws://127.0.0.1:PORT with `ui`). */
  url: string;
  /** With `ui`: the console's base, http://127.0.0.1:PORT. */
  httpBase?: string;
  /** With `ui`: the one-time login address `serve --ui` printed. */
  loginURL?: string;
  socketPath: string;
  tokenFile: string;
  policyFile: string;
  auditLog: string;
  /** The sidecar's --instance: the label value of its containers. */
  instance: string;
  pid: number;
  /** The Claude Code HTTP hook URL (GATEKEEPER_HOOK_URL), when started with hookListen. */
  hookUrl?: string;
  /** The bearer token. */
  token(): string;
  /** Sends the sidecar a signal (SIGKILL to lose it mid-session, SIGSTOP to hang it). */
  signal(sig: NodeJS.Signals): void;
  /** The sidecar's own log so far. */
  log(): string;
  /** Stops the sidecar (SIGTERM, then SIGKILL) and removes the temp tree; again, it does nothing. */
  stop(): Promise<void>;
}

function healthz(where: { socketPath: string } | { host: string; port: number }): Promise<number> {
  return new Promise((done) => {
    const req = request({ ...where, path: '/healthz', method: 'GET', timeout: 500 }, (res) => {
      res.resume();
      done(res.statusCode ?? 0);
    });
    req.on('error', () => done(0));
    req.on('timeout', () => {
      req.destroy();
      done(0);
    });
    req.end();
  });
}

/** startWorld makes the temp tree and starts the real sidecar in it. */
export async function startWorld(o: WorldOptions): Promise<World> {
  if (!existsSync(GATEKEEPER_BIN)) {
    throw new Error(`the gatekeeper binary ${GATEKEEPER_BIN} does not exist: run make build (or go build -o bin/gatekeeper ./cmd/gatekeeper) or set GATEKEEPER_BIN`);
  }
  const root = mkdtempSync(join(tmpdir(), `gk-wt${String(o.n)}-`));
  chmodSync(root, 0o755); // the sandbox user must reach a deps dir below it
  const dirs: Dirs = { root, home: join(root, 'home'), ws: join(root, 'ws'), gk: join(root, 'gk') };
  for (const d of [dirs.home, join(dirs.home, '.ssh'), dirs.ws, dirs.gk]) mkdirSync(d, { recursive: true });
  chmodSync(join(dirs.home, '.ssh'), 0o700);
  writeFileSync(join(dirs.home, '.ssh', 'id_rsa'), FAKE_SSH_KEY, { mode: 0o600 });
  const extra = o.prepare?.(dirs) ?? {};
  const policy = { ...o.policy, ...extra };

  const socketPath = join(dirs.gk, 'gk.sock');
  const tokenFile = join(dirs.gk, 'token');
  const policyFile = join(dirs.gk, 'policy.yaml');
  const auditLog = join(dirs.gk, 'audit.jsonl');
  const logFile = join(dirs.gk, 'sidecar.log');
  const text = o.policyFrom === undefined ? policyYaml(dirs.ws, policy) : readFileSync(o.policyFrom, 'utf8').replace(/^workspace_root:.*$/m, `workspace_root: ${JSON.stringify(dirs.ws)}`);
  writeFileSync(policyFile, text);
  const instance = `walkthrough-${String(o.n)}-${String(process.pid)}`;
  const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin', HOME: dirs.home, ...o.env };
  if (process.env.DOCKER_HOST !== undefined) env.DOCKER_HOST = process.env.DOCKER_HOST;
  if (RUNNER === 'kube') {
    // --kubeconfig, --kube-egress-addr, --kube-egress-ports, --kube-netns from ensure-kube's environment.
    for (const [k, v] of Object.entries(process.env)) if (v !== undefined && (k === 'GATEKEEPER_KUBECONFIG' || k.startsWith('GATEKEEPER_KUBE_'))) env[k] = v;
    if (env.GATEKEEPER_KUBECONFIG === undefined) throw new Error('WALKTHROUGH_RUNNER=kube needs the cluster\'s environment: eval "$(scripts/ensure-kube env)"');
  }
  const args = ['serve', '--runner', RUNNER, '--listen', o.ui === true ? 'tcp://127.0.0.1:0' : `unix://${socketPath}`, ...(o.ui === true ? ['--ui'] : []), '--token-file', tokenFile, '--policy', policyFile, '--audit-log', auditLog, '--instance', instance, '--watch-interval', '0'];
  if (o.hookListen === true) args.push('--hook-listen', 'tcp://127.0.0.1:0');
  if (o.rego !== undefined) {
    const regoDir = join(dirs.gk, 'rego');
    mkdirSync(regoDir);
    for (const [name, text] of Object.entries(o.rego)) writeFileSync(join(regoDir, name), text);
    args.push('--rego-dir', regoDir);
  }
  args.push(...(o.serveArgs ?? []));
  const out = openSync(logFile, 'a');
  const child: ChildProcess = spawn(GATEKEEPER_BIN, args, { env, stdio: ['ignore', out, out] });
  closeSync(out);
  let exited = false;
  // Should this process end without stop() (an uncaught error, Ctrl-C, a
  // closed pipe), the sidecar must not outlive it: SIGTERM lets it remove
  // its warm containers itself.
  const orphanGuard = (): void => {
    if (!exited) child.kill('SIGTERM');
    if (process.env.WALKTHROUGH_KEEP === undefined) rmSync(root, { recursive: true, force: true });
  };
  const onSignal = (sig: NodeJS.Signals): void => {
    orphanGuard();
    process.exit(sig === 'SIGINT' ? 130 : 143);
  };
  process.once('exit', orphanGuard);
  process.once('SIGINT', onSignal);
  process.once('SIGTERM', onSignal);
  child.once('exit', () => {
    exited = true;
    process.removeListener('exit', orphanGuard);
    process.removeListener('SIGINT', onSignal);
    process.removeListener('SIGTERM', onSignal);
  });
  const log = (): string => (existsSync(logFile) ? readFileSync(logFile, 'utf8') : '');
  let stopped = false;
  const deadline = Date.now() + 20_000;
  let url = `unix://${socketPath}`;
  let httpBase: string | undefined;
  let loginURL: string | undefined;
  for (;;) {
    if (exited) throw new Error(`gatekeeper serve exited at start:\n${log()}`);
    if (o.ui === true) {
      // The port is the system's pick: read it from what serve printed.
      const m = /^GATEKEEPER_URL=ws:\/\/(127\.0\.0\.1:(\d+))$/m.exec(log());
      const ui = /^GATEKEEPER_UI=(\S+)$/m.exec(log());
      if (m !== null && ui !== null && (await healthz({ host: '127.0.0.1', port: Number(m[2]) })) === 200) {
        url = `ws://${m[1] ?? ''}`;
        httpBase = `http://${m[1] ?? ''}`;
        loginURL = ui[1];
        break;
      }
    } else if ((await healthz({ socketPath })) === 200) break;
    if (Date.now() > deadline) {
      child.kill('SIGKILL');
      throw new Error(`gatekeeper serve not ready within 20 s:\n${log()}`);
    }
    await new Promise((r) => setTimeout(r, 50));
  }
  const hookUrl = /^GATEKEEPER_HOOK_URL=(\S+)$/m.exec(log())?.[1];
  if (o.hookListen === true && hookUrl === undefined) throw new Error(`gatekeeper serve printed no GATEKEEPER_HOOK_URL:\n${log()}`);
  return {
    dirs,
    url,
    httpBase,
    loginURL,
    socketPath,
    tokenFile,
    policyFile,
    auditLog,
    instance,
    pid: child.pid ?? 0,
    ...(hookUrl !== undefined ? { hookUrl } : {}),
    token: () => readFileSync(tokenFile, 'utf8').trim(),
    signal: (sig) => {
      if (!exited) child.kill(sig);
    },
    log,
    stop: async () => {
      if (stopped) return;
      stopped = true;
      if (!exited) {
        child.kill('SIGCONT'); // a hung (stopped) sidecar cannot handle SIGTERM
        await new Promise<void>((done) => {
          const t = setTimeout(() => {
            child.kill('SIGKILL');
            done();
          }, 5000);
          child.once('exit', () => {
            clearTimeout(t);
            done();
          });
          child.kill('SIGTERM');
        });
      }
      if (process.env.WALKTHROUGH_KEEP === undefined) rmSync(root, { recursive: true, force: true });
      else console.log(`(kept ${root})`);
    },
  };
}

/**
 * containersOf lists the sandboxes (running or not) carrying a label, e.g.
 * gatekeeper.instance=NAME: containers, or Pods under WALKTHROUGH_RUNNER=kube.
 */
export function containersOf(label: string): string[] {
  if (RUNNER === 'kube') return kubeList('pods', label);
  const out = execFileSync('docker', ['ps', '-a', '-q', '--filter', `label=${label}`], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim() !== '');
}

/** networksOf lists the Docker networks carrying a label, or the NetworkPolicies under WALKTHROUGH_RUNNER=kube. */
export function networksOf(label: string): string[] {
  if (RUNNER === 'kube') return kubeList('networkpolicies', label);
  const out = execFileSync('docker', ['network', 'ls', '-q', '--filter', `label=${label}`], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim() !== '');
}

/** kubeList lists the names of a kind of object in the sandboxes' namespace selected by a label, with the runner's credentials. */
function kubeList(kind: string, label: string): string[] {
  const e = process.env;
  const out = execFileSync(e.GATEKEEPER_KUBE_KUBECTL ?? 'kubectl', ['--kubeconfig', e.GATEKEEPER_KUBECONFIG ?? '', '-n', e.GATEKEEPER_KUBE_NAMESPACE ?? 'gatekeeper', 'get', kind, '-l', label, '-o', 'name'], { encoding: 'utf8' });
  return out.split('\n').filter((l) => l.trim() !== '');
}

/**
 * verifyAudit runs `gatekeeper audit verify` on a log and returns its exit
 * code and the lines it printed: one per file of the log (its problems
 * under it), then the verdict.
 */
export function verifyAudit(file: string): { code: number; lines: string[] } {
  const lines = (out: string): string[] => out.split('\n').filter((l) => l !== '');
  try {
    const output = execFileSync(GATEKEEPER_BIN, ['audit', 'verify', file], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
    return { code: 0, lines: lines(output) };
  } catch (err) {
    const e = err as { status?: number; stdout?: string; stderr?: string };
    return { code: e.status ?? 1, lines: lines(`${e.stdout ?? ''}${e.stderr ?? ''}`) };
  }
}

/** AuditRecord is one line of the audit log (docs/SANDBOX.md). */
export interface AuditRecord {
  seq: number;
  /** When the line was written (RFC 3339). */
  time: string;
  kind: 'decision' | 'run' | 'egress' | 'query' | 'rotate' | 'tool_result' | 'event' | 'code_call' | 'session';
  /** The decision a line is, or (tool_result) the one that let the call run. */
  decision_id?: string;
  /** The subagent of a call (Claude Code's agent_id, agent_type). */
  agent_id?: string;
  agent_type?: string;
  query_id?: string;
  /** The client's name (hello.client; "claude-code" for the hook endpoint). */
  client?: string;
  /** The Claude Code session a query serves. */
  session?: string;
  run_id?: string;
  tool_use_id?: string;
  tool?: string;
  event?: string;
  decision?: string;
  rule?: string;
  reason?: string;
  tool_input?: unknown;
  policy_hash?: string;
  outcome?: string;
  exit_code?: number;
  duration_ms?: number;
  peak_memory_bytes?: number;
  truncated?: boolean;
  runtime?: string;
  image?: string;
  error?: string;
  host?: string;
  port?: number;
  /** An egress line of an intercepted request: its method, path and status, and the secrets injected, by name. */
  method?: string;
  path?: string;
  status?: number;
  secrets?: string[];
  intercepted?: boolean;
  /** A code_call line: the MCP server, the call's number in its run, digests and sizes, the error of a call that got no result. */
  server?: string;
  call_seq?: number;
  arguments_sha256?: string;
  arguments_bytes?: number;
  result_sha256?: string;
  result_bytes?: number;
  result_is_error?: boolean;
  error_kind?: string;
  /** A run line: its nested calls, every outcome. */
  tool_calls?: number;
  /** A run line of a run in a session: its number in the session, from 1 (and session_id, below). */
  session_run?: number;
  /** A run line of a run whose session lost its state, as the run_result's state_lost. */
  state_lost?: { reason: string; lost: string; fresh: boolean };
  /** A session line (kind "session", event session_start or session_end): the session, its sandbox and the policy revision it started under; session_id is on the session's run lines too. */
  session_id?: string;
  sandbox?: string;
  revision?: string;
  /** A session_end line: how many runs the session served (its reason is in reason). */
  runs?: number;
  /** A session line: when the session's sandbox started. */
  started?: string;
  /** A rotate line's file before it, and the files retention removed. */
  prev_file?: string;
  pruned?: string[];
}

/**
 * auditLines reads every line of an audit log, as written, oldest first:
 * its rotated files (FILE.<first seq>, FILE.<first seq>.gz, by seq), then
 * the active FILE.
 */
export function auditLines(file: string): string[] {
  const base = basename(file);
  const closed = readdirSync(dirname(file))
    .map((name) => ({ name, m: /^(.*)\.(\d{12,})(\.gz)?$/.exec(name) }))
    .filter((x): x is { name: string; m: RegExpExecArray } => x.m !== null && x.m[1] === base)
    .sort((a, b) => Number(a.m[2]) - Number(b.m[2]) || (a.m[3] === undefined ? -1 : 1))
    .filter((x, i, all) => i === 0 || all[i - 1]?.m[2] !== x.m[2]);
  const texts = closed.map((x) => {
    const data = readFileSync(join(dirname(file), x.name));
    return (x.m[3] === undefined ? data : gunzipSync(data)).toString('utf8');
  });
  if (existsSync(file)) texts.push(readFileSync(file, 'utf8'));
  return texts.flatMap((t) => t.split('\n')).filter((l) => l.trim() !== '');
}

/** readAudit reads every record of an audit log, across its rotated files. */
export function readAudit(file: string): AuditRecord[] {
  return auditLines(file).map((l) => JSON.parse(l) as AuditRecord);
}
