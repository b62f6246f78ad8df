// Connection settings: the sidecar's address, the token, timeouts, and the
// injectable socket.

import { lstatSync, readFileSync, statSync } from 'node:fs';
import { homedir } from 'node:os';
import { join } from 'node:path';
import { WS_PATH } from './protocol.js';

/**
 * GatekeeperLogger receives the client's diagnostics. Every method is
 * optional; one left out drops its messages. Without a logger at all the
 * client uses stderrLogger: warnings and errors to stderr, nothing else.
 * The client never writes to stdout.
 */
export interface GatekeeperLogger {
  /** Frame-level detail: connects, frames sent and received. */
  debug?(message: string, fields?: Record<string, unknown>): void;
  /** Noteworthy events: a (re)connection, a query opened on the sidecar. */
  info?(message: string, fields?: Record<string, unknown>): void;
  /** Something failed closed: a lost connection, a decision timed out. */
  warn?(message: string, fields?: Record<string, unknown>): void;
  /** The client itself misbehaved. */
  error?(message: string, fields?: Record<string, unknown>): void;
}

/**
 * SocketHandlers are the events a GatekeeperSocket reports. `onClose` is
 * called exactly once per socket, whether it opened or not, with a reason
 * readable by a person (`"connect ECONNREFUSED /run/gk.sock"`, `"HTTP 401"`).
 */
export interface SocketHandlers {
  /** The WebSocket handshake succeeded. */
  onOpen(): void;
  /** One frame arrived; `binary` is true for a binary frame. */
  onMessage(data: string, binary: boolean): void;
  /**
   * The socket closed or could not open. `status` is the HTTP status of a
   * refused upgrade (401 for a wrong or missing token).
   */
  onClose(reason: string, status?: number): void;
}

/** GatekeeperSocket is the little the client needs of a WebSocket. */
export interface GatekeeperSocket {
  /** Sends one text frame. Must not throw once `onOpen` has been called. */
  send(data: string): void;
  /** Closes the socket; `onClose` follows. */
  close(): void;
}

/**
 * CreateSocket opens a socket to `address` (a `ws://`, `wss://` or
 * `ws+unix://` URL as the `ws` package spells it) sending `headers` with the
 * upgrade request. The default uses the `ws` package; tests inject a fake.
 */
export type CreateSocket = (
  target: { address: string; headers: Record<string, string> },
  handlers: SocketHandlers,
) => GatekeeperSocket;

/** GatekeeperOptions say how to reach the gatekeeper sidecar. */
export interface GatekeeperOptions {
  /**
   * Where the sidecar listens: `unix:///path/to/gatekeeper.sock`, a bare
   * absolute socket path, `ws://127.0.0.1:7777` (the path `/v1/ws` is
   * appended when none is given) or `tcp://127.0.0.1:7777`. Default: env
   * `GATEKEEPER_URL`, else the sidecar's default socket
   * (`$XDG_RUNTIME_DIR/gatekeeper.sock`, else `/tmp/gatekeeper-$UID/gatekeeper.sock`).
   */
  url?: string;
  /**
   * The bearer token. Default: the content of `tokenFile`, else env
   * `GATEKEEPER_TOKEN`, else the content of the file named by env
   * `GATEKEEPER_TOKEN_FILE`, else the content of `serve`'s default token
   * file (`$XDG_CONFIG_HOME/gatekeeper/token`, else
   * `~/.config/gatekeeper/token`).
   */
  token?: string;
  /**
   * A file holding the token (trailing white space ignored). It is read on
   * every (re)connection, so a rotated token is picked up.
   */
  tokenFile?: string;
  /**
   * How long a tool call may wait for gatekeeper's decision, including any
   * wait for a reconnection, before it is denied. Default 2000.
   */
  decisionTimeoutMs?: number;
  /**
   * Receives diagnostics. Default: stderrLogger (warnings and errors to
   * stderr); `{}` drops them all. Nothing is ever written to stdout.
   */
  logger?: GatekeeperLogger;
  /** Replaces the WebSocket transport (for tests). */
  createSocket?: CreateSocket;
}

/** ResolvedConfig is GatekeeperOptions with the defaults and env applied. */
export interface ResolvedConfig {
  /** What to pass to the socket (ws's spelling). */
  address: string;
  /** The URL as given, for messages. */
  display: string;
  /** Returns the token or throws with a reason. Called per connection. */
  token: () => string;
  /** Where the token comes from, for messages: `"env GATEKEEPER_TOKEN_FILE (/p/token)"`. */
  tokenOrigin: string;
  decisionTimeoutMs: number;
  logger: GatekeeperLogger;
  createSocket?: CreateSocket;
}

/** GatekeeperConfigError says the client's options cannot work. */
export class GatekeeperConfigError extends Error {
  override name = 'GatekeeperConfigError';
}

/** DEFAULT_DECISION_TIMEOUT_MS is the default of `decisionTimeoutMs`. */
export const DEFAULT_DECISION_TIMEOUT_MS = 2000;

/**
 * defaultUrl is the sidecar's default listening socket, as docs/protocol.md
 * describes it.
 */
export function defaultUrl(env: NodeJS.ProcessEnv = process.env): string {
  if (env.XDG_RUNTIME_DIR) return `unix://${env.XDG_RUNTIME_DIR.replace(/\/+$/, '')}/gatekeeper.sock`;
  const uid = typeof process.getuid === 'function' ? process.getuid() : 0;
  return `unix:///tmp/gatekeeper-${uid}/gatekeeper.sock`;
}

/**
 * parseUrl turns a GATEKEEPER_URL into the address the `ws` package dials:
 * `unix:///p/gk.sock` and `/p/gk.sock` become `ws+unix:///p/gk.sock:/v1/ws`;
 * `ws://host:port` and `tcp://host:port` become `ws://host:port/v1/ws`;
 * an explicit path is kept. It throws GatekeeperConfigError for anything else.
 */
export function parseUrl(raw: string): string {
  const url = raw.trim();
  if (url === '') throw new GatekeeperConfigError('gatekeeper url is empty');
  if (url.startsWith('/')) return unixAddress(url, raw);
  if (url.startsWith('unix://')) {
    const path = url.slice('unix://'.length);
    if (!path.startsWith('/')) throw new GatekeeperConfigError(`gatekeeper url ${raw}: a unix socket path must be absolute (unix:///path/to/gatekeeper.sock)`);
    return unixAddress(path, raw);
  }
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new GatekeeperConfigError(`gatekeeper url ${raw} is not a URL (want unix:///path/to/gatekeeper.sock or ws://127.0.0.1:7777)`);
  }
  let scheme: string;
  switch (u.protocol) {
    case 'ws:':
    case 'tcp:':
      scheme = 'ws:';
      break;
    case 'wss:':
      scheme = 'wss:';
      break;
    default:
      throw new GatekeeperConfigError(`gatekeeper url ${raw} has unsupported scheme ${u.protocol} (want unix://, ws://, wss:// or tcp://)`);
  }
  if (u.username || u.password) throw new GatekeeperConfigError(`gatekeeper url ${raw} must not carry credentials; use the token`);
  if (u.hash) throw new GatekeeperConfigError(`gatekeeper url ${raw} must not have a fragment`);
  if (!u.host) throw new GatekeeperConfigError(`gatekeeper url ${raw} has no host`);
  // The URL parser leaves "/" for an empty path of a special scheme and ""
  // for tcp: (not special), so read the path from the raw text.
  const afterHost = url.slice(url.indexOf('//') + 2);
  const slash = afterHost.search(/[/?]/);
  const rest = slash < 0 ? '' : afterHost.slice(slash);
  const path = rest === '' || rest === '/' || rest.startsWith('?') ? WS_PATH + rest.replace(/^\//, '') : rest;
  return `${scheme}//${u.host}${path}`;
}

function unixAddress(path: string, raw: string): string {
  if (path.includes(':')) throw new GatekeeperConfigError(`gatekeeper url ${raw}: a unix socket path must not contain ":"`);
  if (path.includes('?') || path.includes('#')) throw new GatekeeperConfigError(`gatekeeper url ${raw}: a unix socket path must not contain "?" or "#"`);
  return `ws+unix://${path}:${WS_PATH}`;
}

/**
 * defaultTokenFile is `gatekeeper serve`'s default --token-file, as
 * cmd/gatekeeper's defaultTokenFile computes it: `$XDG_CONFIG_HOME/gatekeeper/token`,
 * else `$HOME/.config/gatekeeper/token`.
 */
export function defaultTokenFile(env: NodeJS.ProcessEnv = process.env): string {
  if (env.XDG_CONFIG_HOME) return join(env.XDG_CONFIG_HOME, 'gatekeeper', 'token');
  return join(env.HOME || homedir(), '.config', 'gatekeeper', 'token');
}

/** TokenSource returns the token (reading a file on every call) and says where it comes from. */
export interface TokenSource {
  (): string;
  /** Where the token comes from, for messages. */
  origin: string;
}

/**
 * tokenSource picks where the token comes from: `token`, else `tokenFile`,
 * else env `GATEKEEPER_TOKEN`, else env `GATEKEEPER_TOKEN_FILE`, else
 * serve's default token file (defaultTokenFile). Files are read when the
 * returned function is called (once per connection) and trimmed; a file
 * that cannot be read or is empty throws then. An empty literal token
 * throws GatekeeperConfigError at once.
 */
export function tokenSource(opts: Pick<GatekeeperOptions, 'token' | 'tokenFile'>, env: NodeJS.ProcessEnv = process.env): TokenSource {
  const literal = (t: string, where: string): TokenSource => {
    const v = t.trim();
    if (v === '') throw new GatekeeperConfigError(`gatekeeper token from ${where} is empty`);
    return Object.assign(() => v, { origin: where });
  };
  const file = (path: string, where: string): TokenSource =>
    Object.assign(
      () => {
        let text: string;
        try {
          text = readFileSync(path, 'utf8');
        } catch (err) {
          throw new Error(`cannot read the token file ${path} (${where}): ${(err as Error).message}`);
        }
        const v = text.trim();
        if (v === '') throw new Error(`the token file ${path} (${where}) is empty`);
        return v;
      },
      { origin: `${where} (${path})` },
    );
  if (opts.token !== undefined) return literal(opts.token, 'options.gatekeeper.token');
  if (opts.tokenFile !== undefined) return file(opts.tokenFile, 'options.gatekeeper.tokenFile');
  if (env.GATEKEEPER_TOKEN) return literal(env.GATEKEEPER_TOKEN, 'env GATEKEEPER_TOKEN');
  if (env.GATEKEEPER_TOKEN_FILE) return file(env.GATEKEEPER_TOKEN_FILE, 'env GATEKEEPER_TOKEN_FILE');
  return file(defaultTokenFile(env), "serve's default token file");
}

/**
 * stderrLogger is the default logger: warnings and errors, one line each,
 * to stderr (`gatekeeper: <message> {fields as JSON}`); debug and info are
 * dropped.
 */
export const stderrLogger: GatekeeperLogger = {
  warn: (message, fields) => writeStderr('warn', message, fields),
  error: (message, fields) => writeStderr('error', message, fields),
};

function writeStderr(level: string, message: string, fields?: Record<string, unknown>): void {
  let extra = '';
  if (fields !== undefined && Object.keys(fields).length > 0) {
    try {
      extra = ` ${JSON.stringify(fields)}`;
    } catch {
      extra = ' (fields not printable)';
    }
  }
  process.stderr.write(`[${level}] ${message}${extra}\n`);
}

/**
 * sharedDirProblem says why the default socket's directory, a name in /tmp
 * that anyone can make first, must not be trusted: it (or the link to it)
 * belongs to another user than this one and root, who could put a socket
 * of its own there, collect the token and answer every call. The sidecar
 * refuses to listen there, and its Go clients to connect, for the same
 * reason: internal/sockdir has the Go copy of this check.
 */
export function sharedDirProblem(dir: string): string | undefined {
  const me = typeof process.getuid === 'function' ? process.getuid() : 0;
  for (const stat of [lstatSync, statSync]) {
    let uid: number;
    try {
      uid = stat(dir).uid;
    } catch {
      return undefined; // nothing there: the connection fails on its own
    }
    if (uid !== me && uid !== 0) {
      return `the default socket's directory ${dir} belongs to uid ${String(uid)}, not to this user (uid ${String(me)}) or root, so that user could impersonate the sidecar: remove it, or set GATEKEEPER_URL or XDG_RUNTIME_DIR to a directory of your own`;
    }
  }
  return undefined;
}

/** resolveConfig applies env and defaults; it throws GatekeeperConfigError. */
export function resolveConfig(opts: GatekeeperOptions = {}, env: NodeJS.ProcessEnv = process.env): ResolvedConfig {
  const display = opts.url ?? env.GATEKEEPER_URL ?? defaultUrl(env);
  const timeout = opts.decisionTimeoutMs ?? DEFAULT_DECISION_TIMEOUT_MS;
  if (!Number.isFinite(timeout) || timeout <= 0) {
    throw new GatekeeperConfigError(`gatekeeper decisionTimeoutMs must be a positive number of milliseconds, got ${String(timeout)}`);
  }
  const source = tokenSource(opts, env);
  // The /tmp default is checked at each connection, before the token is
  // sent: the directory may appear after the client starts.
  const tmpDefault = opts.url === undefined && env.GATEKEEPER_URL === undefined && !env.XDG_RUNTIME_DIR;
  const token: TokenSource = tmpDefault
    ? Object.assign(
        () => {
          const dir = display.slice('unix://'.length).replace(/\/[^/]*$/, '');
          const problem = sharedDirProblem(dir);
          if (problem !== undefined) throw new GatekeeperConfigError(problem);
          return source();
        },
        { origin: source.origin },
      )
    : source;
  const cfg: ResolvedConfig = {
    address: parseUrl(display),
    display,
    token,
    tokenOrigin: token.origin,
    decisionTimeoutMs: timeout,
    logger: opts.logger ?? stderrLogger,
  };
  if (opts.createSocket) cfg.createSocket = opts.createSocket;
  return cfg;
}
