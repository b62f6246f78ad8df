// One WebSocket connection to the sidecar, kept up with reconnection and
// backoff while anything needs it.

import type { ResolvedConfig, GatekeeperSocket } from './config.js';
import { wsSocket } from './socket.js';
import {
  MalformedReplyError,
  parseReply,
  PROTOCOL_VERSION,
  type OutputReply,
  type Reply,
  type ApprovalCancelReply,
  type ApprovalFrame,
  type ApprovalRequestReply,
  type ToolCallReply,
  type ToolCancelReply,
  type ToolResultFrame,
  type UnsentFrame,
} from './protocol.js';

/** A frame the sidecar sends on its own: a relayed call to an in-process tool, an ask on a nested call, or their cancellations. */
export type ServerFrame = ToolCallReply | ToolCancelReply | ApprovalRequestReply | ApprovalCancelReply;

/** The client name sent in `hello`. */
export const CLIENT_NAME = `@gatekeeper/client/0.1.0 (node ${process.versions.node})`;

/** UnavailableError says the sidecar could not be asked. */
export class UnavailableError extends Error {
  override name = 'UnavailableError';
}

/**
 * GatekeeperUnavailableError is thrown when a query opens and the sidecar
 * cannot be asked: `code` is `"unauthorized"` when it refused the token
 * (HTTP 401), `"no_token"` when the token file cannot be read or is
 * empty, `"unreachable"` for anything else (no socket, nothing listening,
 * no answer in time). The message names the address, the token's origin
 * and what to check. Nothing has reached the model when it is thrown.
 */
export class GatekeeperUnavailableError extends Error {
  override name = 'GatekeeperUnavailableError';
  /** `"unauthorized"` (HTTP 401), `"no_token"` or `"unreachable"`. */
  readonly code: UnavailableCode;
  /** The sidecar's address as configured (`unix:///…/gatekeeper.sock`, `ws://…`). */
  readonly url: string;
  /** Why the client could not connect, as it saw it. */
  readonly reason: string;

  constructor(code: UnavailableCode, url: string, reason: string, message: string) {
    super(message);
    this.code = code;
    this.url = url;
    this.reason = reason;
  }
}

/** Why a query could not open: see GatekeeperUnavailableError. */
export type UnavailableCode = 'unauthorized' | 'no_token' | 'unreachable';

/** What made the last connection attempt fail, besides its reason. */
export interface AttemptFailure {
  /** The HTTP status of a refused upgrade. */
  status?: number;
  /** The token could not be had (its file unreadable or empty). */
  token?: boolean;
}

/**
 * unavailableAtOpen is the error a query's first open throws when the
 * sidecar could not be asked: `reason` is what the open saw, `failure`
 * what made the last connection attempt fail.
 */
export function unavailableAtOpen(cfg: ResolvedConfig, reason: string, failure: AttemptFailure): GatekeeperUnavailableError {
  if (failure.token === true) {
    return new GatekeeperUnavailableError(
      'no_token',
      cfg.display,
      reason,
      `gatekeeper: no token to send to ${cfg.display} (${reason}). gatekeeper serve writes its token to its --token-file ` +
        '(default ~/.config/gatekeeper/token) when it first starts; point options.gatekeeper.tokenFile or env GATEKEEPER_TOKEN_FILE at that file.',
    );
  }
  if (failure.status === 401) {
    return new GatekeeperUnavailableError(
      'unauthorized',
      cfg.display,
      reason,
      `gatekeeper at ${cfg.display} refused the token (HTTP 401). The client sent the token from ${cfg.tokenOrigin}; ` +
        'it must be the one that gatekeeper serve reads from its --token-file (default ~/.config/gatekeeper/token). ' +
        'Point options.gatekeeper.tokenFile or env GATEKEEPER_TOKEN_FILE at that file.',
    );
  }
  return new GatekeeperUnavailableError(
    'unreachable',
    cfg.display,
    reason,
    `gatekeeper is not reachable at ${cfg.display} (${reason}). Check that gatekeeper serve is running and that options.gatekeeper.url ` +
      'or env GATEKEEPER_URL is the GATEKEEPER_URL it printed; the token comes from ' +
      `${cfg.tokenOrigin}.`,
  );
}

/** How long the WebSocket handshake plus hello may take. */
const HANDSHAKE_TIMEOUT_MS = 5000;
const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 5000;

interface Pending {
  resolve(r: Reply): void;
  reject(e: Error): void;
  onOutput?: (o: OutputReply) => void;
  timer?: NodeJS.Timeout;
}

interface Waiter {
  resolve(generation: number): void;
  reject(e: Error): void;
  timer: NodeJS.Timeout;
}

type State = 'idle' | 'connecting' | 'ready' | 'backoff' | 'closed';

/** RequestOptions bound one request. */
export interface RequestOptions {
  /** Epoch ms after which the request fails with UnavailableError. */
  deadline?: number;
  /** The request is only sent on this connection generation. */
  generation?: number;
  /** Receives `output` frames of a run. */
  onOutput?: (o: OutputReply) => void;
}

/**
 * Connection owns one WebSocket to the sidecar at a time. It connects when
 * first asked to, says hello, and while it is `hold()`-ed it reconnects with
 * exponential backoff (100 ms to 5 s) after a failure; a caller waiting in
 * `waitReady` cuts a backoff short. Every socket gets a new generation
 * number: state tied to a connection (query ids) is tagged with it.
 *
 * Requests are matched to replies by `id`; a request whose connection is lost
 * fails with UnavailableError, one that outlives its deadline too. All
 * methods are for one event loop; nothing here blocks.
 */
export class Connection {
  private readonly cfg: ResolvedConfig;
  private state: State = 'idle';
  private socket: GatekeeperSocket | undefined;
  private generation = 0;
  private nextId = 0;
  private failures = 0;
  private holds = 0;
  private backoffTimer: NodeJS.Timeout | undefined;
  private readonly pending = new Map<string, Pending>();
  private readonly waiters = new Set<Waiter>();
  private lastError = 'not connected yet';
  private lastFailure: AttemptFailure = {};
  private onServerFrame: ((f: ServerFrame, generation: number) => void) | undefined;

  constructor(cfg: ResolvedConfig) {
    this.cfg = cfg;
  }

  /** The settings this connection was made with. */
  get config(): ResolvedConfig {
    return this.cfg;
  }

  /**
   * failure says what made the last connection attempt fail besides its
   * reason (a refused upgrade's HTTP status, a token that could not be
   * had); empty after a success.
   */
  get failure(): AttemptFailure {
    return this.lastFailure;
  }

  /** hold keeps the connection up (reconnecting) until the matching release. */
  hold(): void {
    this.holds++;
    if (this.state === 'idle') this.connectNow();
  }

  /**
   * release undoes one hold; with none left the connection is dropped (and
   * made again by the next hold or waitReady).
   */
  release(): void {
    this.holds = Math.max(0, this.holds - 1);
    if (this.holds > 0 || this.state === 'closed' || this.state === 'idle') return;
    // Drop the socket now, not when its close event comes: a hold that
    // follows at once must get a new connection, not this closing one.
    clearTimeout(this.backoffTimer);
    const s = this.socket;
    this.socket = undefined;
    this.generation++;
    this.state = 'idle';
    this.lastError = 'not connected';
    this.failAll('the connection was released');
    s?.close();
  }

  /**
   * waitReady resolves with the current generation once the connection is
   * up. It starts a connection attempt at once if none is under way, and
   * fails as soon as that attempt fails, or at the deadline.
   */
  waitReady(deadline: number): Promise<number> {
    if (this.state === 'ready') return Promise.resolve(this.generation);
    if (this.state === 'closed') return Promise.reject(new UnavailableError('the gatekeeper client was closed'));
    if (this.state !== 'connecting') this.connectNow();
    return new Promise<number>((resolve, reject) => {
      const ms = Math.max(0, deadline - Date.now());
      const w: Waiter = {
        resolve,
        reject,
        timer: setTimeout(() => {
          this.waiters.delete(w);
          reject(new UnavailableError(`not connected within ${String(ms)} ms (${this.lastError})`));
        }, ms),
      };
      this.waiters.add(w);
    });
  }

  /**
   * request sends one frame and resolves with its reply (for a run: the
   * `run_result` or `error` that ends it). It rejects with UnavailableError
   * when the connection is not up (or not of `generation`), is lost, or the
   * deadline passes, and with MalformedReplyError for a reply that breaks the
   * protocol.
   */
  request(frame: UnsentFrame, opts: RequestOptions = {}): Promise<Reply> {
    if (this.state !== 'ready' || this.socket === undefined) {
      return Promise.reject(new UnavailableError(`not connected (${this.lastError})`));
    }
    if (opts.generation !== undefined && opts.generation !== this.generation) {
      return Promise.reject(new UnavailableError('the connection was replaced'));
    }
    return this.send(this.socket, frame, opts);
  }

  /**
   * serve sets who takes the frames the sidecar sends on its own
   * (tool_call, tool_cancel), with the generation of the connection they
   * came on. Without one, a tool_call is answered with
   * an error: this client runs no tool it was not given.
   */
  serve(handler: (f: ServerFrame, generation: number) => void): void {
    this.onServerFrame = handler;
  }

  /**
   * answer sends a tool_result on the current connection, if it is still
   * `generation`; an answer for a lost connection is dropped, as the
   * sidecar dropped its call.
   */
  answer(frame: ToolResultFrame | ApprovalFrame, generation: number): void {
    if (this.state !== 'ready' || this.socket === undefined || generation !== this.generation) return;
    try {
      this.socket.send(JSON.stringify(frame));
    } catch (err) {
      this.cfg.logger.warn?.(`gatekeeper: a ${frame.type} could not be sent`, { id: frame.id, error: (err as Error).message });
    }
  }

  /** close drops the connection for good and fails everything waiting. */
  close(): void {
    if (this.state === 'closed') return;
    this.state = 'closed';
    this.lastError = 'the gatekeeper client was closed';
    clearTimeout(this.backoffTimer);
    const s = this.socket;
    this.socket = undefined;
    this.failAll(this.lastError);
    s?.close();
  }

  private send(socket: GatekeeperSocket, frame: UnsentFrame, opts: RequestOptions): Promise<Reply> {
    const id = String(++this.nextId);
    const full = { ...frame, id };
    return new Promise<Reply>((resolve, reject) => {
      const p: Pending = { resolve, reject };
      if (opts.onOutput) p.onOutput = opts.onOutput;
      if (opts.deadline !== undefined) {
        const ms = Math.max(0, opts.deadline - Date.now());
        p.timer = setTimeout(() => {
          this.pending.delete(id);
          reject(new UnavailableError(`no reply to ${frame.type} within ${String(ms)} ms`));
        }, ms);
      }
      this.pending.set(id, p);
      try {
        socket.send(JSON.stringify(full));
        this.cfg.logger.debug?.('gatekeeper: sent', { type: frame.type, id });
      } catch (err) {
        this.pending.delete(id);
        clearTimeout(p.timer);
        reject(new UnavailableError(`send failed: ${(err as Error).message}`));
      }
    });
  }

  private connectNow(): void {
    if (this.state === 'closed' || this.state === 'connecting' || this.state === 'ready') return;
    clearTimeout(this.backoffTimer);
    this.state = 'connecting';
    const gen = ++this.generation;
    let token: string;
    try {
      token = this.cfg.token();
    } catch (err) {
      queueMicrotask(() => this.onClosed(gen, (err as Error).message, { token: true }));
      return;
    }
    this.cfg.logger.debug?.('gatekeeper: connecting', { url: this.cfg.display, generation: gen });
    const create = this.cfg.createSocket ?? wsSocket;
    let handshake: NodeJS.Timeout | undefined;
    let socket: GatekeeperSocket | undefined;
    // failure is why this attempt gave up itself, which says more than the
    // close that follows.
    let failure: string | undefined;
    const current = (): boolean => gen === this.generation && this.state !== 'closed';
    try {
      socket = create(
        { address: this.cfg.address, headers: { Authorization: `Bearer ${token}` } },
        {
          onOpen: () => {
            if (!current() || socket === undefined) return;
            const s = socket;
            this.send(s, { type: 'hello', v: PROTOCOL_VERSION, client: CLIENT_NAME }, { deadline: Date.now() + HANDSHAKE_TIMEOUT_MS })
              .then((reply) => {
                if (!current()) return;
                if (reply.type !== 'welcome') {
                  const why = reply.type === 'error' ? `${reply.code}: ${reply.message}` : `unexpected ${reply.type}`;
                  throw new UnavailableError(`hello refused (${why})`);
                }
                if (reply.v !== PROTOCOL_VERSION) throw new UnavailableError(`the sidecar speaks protocol v${String(reply.v)}`);
                clearTimeout(handshake);
                this.state = 'ready';
                this.failures = 0;
                this.lastFailure = {};
                this.cfg.logger.info?.('gatekeeper: connected', { url: this.cfg.display, server: reply.server, generation: gen });
                for (const w of this.waiters) {
                  clearTimeout(w.timer);
                  w.resolve(gen);
                }
                this.waiters.clear();
              })
              .catch((err: Error) => {
                if (!current() || this.state !== 'connecting') return;
                failure = err.message;
                s.close();
              });
          },
          onMessage: (data, binary) => {
            if (!current()) return;
            this.onMessage(data, binary);
          },
          onClose: (reason, status) => {
            clearTimeout(handshake);
            this.onClosed(gen, failure ?? reason, status === undefined ? {} : { status });
          },
        },
      );
    } catch (err) {
      queueMicrotask(() => this.onClosed(gen, (err as Error).message));
      return;
    }
    this.socket = socket;
    handshake = setTimeout(() => {
      if (current() && this.state === 'connecting') {
        failure = `no welcome within ${String(HANDSHAKE_TIMEOUT_MS)} ms`;
        socket?.close();
      }
    }, HANDSHAKE_TIMEOUT_MS);
  }

  private onMessage(data: string, binary: boolean): void {
    if (binary) {
      this.cfg.logger.warn?.('gatekeeper: ignored a binary frame from the sidecar');
      return;
    }
    let reply: Reply;
    try {
      reply = parseReply(data);
    } catch (err) {
      const id = looseId(data);
      const p = id === undefined ? undefined : this.pending.get(id);
      this.cfg.logger.warn?.('gatekeeper: malformed frame from the sidecar', { error: (err as Error).message, id });
      if (p && id !== undefined) {
        this.pending.delete(id);
        clearTimeout(p.timer);
        p.reject(err instanceof MalformedReplyError ? err : new MalformedReplyError(String(err)));
      } else if (id === undefined) {
        // A frame we cannot even attribute: the stream is not to be trusted.
        this.failAll(`the sidecar sent a malformed frame: ${(err as Error).message}`);
        this.socket?.close();
      }
      return;
    }
    if (reply.type === 'tool_call' || reply.type === 'tool_cancel' || reply.type === 'approval_request' || reply.type === 'approval_cancel') {
      if (this.onServerFrame !== undefined) this.onServerFrame(reply, this.generation);
      else if (reply.type === 'tool_call') this.answer({ type: 'tool_result', id: reply.id, error: 'this client declared no in-process tools' }, this.generation);
      else if (reply.type === 'approval_request') this.answer({ type: 'approval', id: reply.id, decision: 'deny', message: 'this client has no handler for asks' }, this.generation);
      return;
    }
    const p = this.pending.get(reply.id);
    if (p === undefined) {
      if (reply.type === 'error') {
        this.cfg.logger.warn?.('gatekeeper: error frame for no pending request', { id: reply.id, code: reply.code, message: reply.message });
      } else {
        this.cfg.logger.debug?.('gatekeeper: late or unknown reply', { id: reply.id, type: reply.type });
      }
      return;
    }
    if (reply.type === 'output') {
      if (p.onOutput) p.onOutput(reply);
      else this.cfg.logger.warn?.('gatekeeper: output frame for a request that is not a run', { id: reply.id });
      return;
    }
    this.pending.delete(reply.id);
    clearTimeout(p.timer);
    p.resolve(reply);
  }

  private onClosed(gen: number, reason: string, why: AttemptFailure = {}): void {
    if (gen !== this.generation || this.state === 'closed') return;
    const wasReady = this.state === 'ready';
    this.socket = undefined;
    this.lastError = reason;
    this.lastFailure = why;
    this.failAll(reason);
    if (wasReady) this.cfg.logger.warn?.('gatekeeper: connection lost', { reason });
    else this.cfg.logger.warn?.('gatekeeper: cannot connect', { url: this.cfg.display, reason });
    if (this.holds === 0) {
      this.state = 'idle';
      return;
    }
    this.state = 'backoff';
    const base = Math.min(BACKOFF_MAX_MS, BACKOFF_MIN_MS * 2 ** this.failures);
    this.failures++;
    const delay = Math.round(base * (0.8 + Math.random() * 0.4));
    this.backoffTimer = setTimeout(() => this.connectNow(), delay);
    this.backoffTimer.unref();
  }

  private failAll(reason: string): void {
    for (const [id, p] of this.pending) {
      this.pending.delete(id);
      clearTimeout(p.timer);
      p.reject(new UnavailableError(`connection lost (${reason})`));
    }
    for (const w of this.waiters) {
      clearTimeout(w.timer);
      w.reject(new UnavailableError(reason));
    }
    this.waiters.clear();
  }
}

function looseId(data: string): string | undefined {
  try {
    const v: unknown = JSON.parse(data);
    if (typeof v === 'object' && v !== null && typeof (v as { id?: unknown }).id === 'string') return (v as { id: string }).id;
  } catch {
    // not JSON at all
  }
  return undefined;
}
