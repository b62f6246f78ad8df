// A query on the sidecar: opened (and reopened after a reconnection) with
// the same override, asked for decisions and runs, closed at the end.

import { Connection, UnavailableError, type ServerFrame } from './connection.js';
import type { SdkTools } from './sdk-tools.js';
import type { Approver } from './approvals.js';
import {
  GatekeeperError,
  MalformedReplyError,
  type DecideEvent,
  type DecisionKind,
  type McpServerRef,
  type Reply,
  type RunArgs,
  type RunFrame,
  type RunResultReply,
} from './protocol.js';

/** Decision is what gatekeeper decided about one tool call. */
export interface Decision {
  decision: DecisionKind;
  /** A sentence written for the model. */
  reason: string;
  /** The rule that decided; `client.*` rules are this client's own. */
  rule: string;
}

/** The rule of every deny this client makes itself because it could not ask. */
export const UNAVAILABLE_RULE = 'client.gatekeeper_unavailable';

/** unavailableDecision is the fail-closed deny. */
export function unavailableDecision(why: string): Decision {
  return {
    decision: 'deny',
    reason: `gatekeeper is unavailable (${why}), so this tool call is denied`,
    rule: UNAVAILABLE_RULE,
  };
}

/** What opening a query the first time gave. */
export interface FirstOpen {
  /** The query's effective policy, when the sidecar could be reached. */
  effectivePolicy?: Record<string, unknown>;
  /** Why the sidecar could not be reached. */
  unavailable?: string;
  /**
   * The run tool's description when the query's code may call MCP tools
   * (query_opened's tool_description): it names the servers and how to
   * discover their tools. Absent: the plain description.
   */
  toolDescription?: string;
}


/** How long a close_query may take before we stop waiting. */
const CLOSE_TIMEOUT_MS = 1000;
/** The time an open_query may take, at least. */
const OPEN_TIMEOUT_MS = 5000;
/** Added to a run's own timeout before the client gives up on its result. */
const RUN_SLACK_MS = 60_000;
/** The run timeout the client assumes when neither the call nor the policy says. */
const RUN_DEFAULT_MS = 600_000;

/**
 * SidecarQuery is one query on the sidecar. Its query id belongs to one
 * connection generation: after a reconnection it is opened again, lazily,
 * with the same override, by the next request that needs it. Its methods
 * never throw for an unreachable sidecar: `decide` denies and `run` returns
 * an error, so a caller fails closed without a try.
 */
export class SidecarQuery {
  private readonly conn: Connection;
  private readonly override: Record<string, unknown> | undefined;
  private queryId: string | undefined;
  private queryGen = -1;
  private opening: { gen: number; p: Promise<string> } | undefined;
  private rejected: GatekeeperError | undefined;
  private closed = false;
  private effective: Record<string, unknown> | undefined;
  private toolDescription: string | undefined;
  private readonly tools: SdkTools | undefined;
  /** The relayed calls running, by the sidecar's call id. */
  private readonly calls = new Map<string, AbortController>();
  private readonly approver: Approver | undefined;
  /** The asks being answered, by the sidecar's ask id. */
  private readonly asks = new Map<string, AbortController>();

  /**
   * tools are the caller's in-process servers that sandboxed code may
   * call: declared in every open_query of this query, and run when the
   * sidecar relays a call to one. approver, when given, answers the
   * policy's asks on the calls of this query's programs: every open_query
   * says so (approvals), and without one the sidecar denies such an ask.
   */
  constructor(conn: Connection, override: Record<string, unknown> | undefined, tools?: SdkTools, approver?: Approver) {
    this.conn = conn;
    this.override = override;
    this.approver = approver;
    if (tools !== undefined && tools.declared.length > 0) this.tools = tools;
    if (this.tools !== undefined || approver !== undefined) conn.serve((f, gen) => this.onServerFrame(f, gen));
    conn.hold();
  }

  /**
   * firstOpen opens the query, waiting at most `timeoutMs` for the sidecar.
   * It throws GatekeeperError when the sidecar refuses the query (an
   * override beyond the ceilings); an unreachable sidecar is reported in
   * the result instead, and decisions then fail closed until it is back.
   */
  async firstOpen(timeoutMs: number): Promise<FirstOpen> {
    try {
      await this.ensureOpen(Date.now() + timeoutMs);
      return {
        ...(this.effective ? { effectivePolicy: this.effective } : {}),
        ...(this.toolDescription !== undefined ? { toolDescription: this.toolDescription } : {}),
      };
    } catch (err) {
      if (err instanceof GatekeeperError) throw err;
      return { unavailable: (err as Error).message };
    }
  }

  /**
   * decide asks gatekeeper about one tool call. It never throws: anything
   * that keeps gatekeeper from answering within decisionTimeoutMs (an
   * unreachable sidecar, a lost connection, a malformed reply, an `error`
   * frame) is a deny that says why.
   */
  async decide(event: DecideEvent, toolName: string, toolInput: unknown, toolUseId: string, mcpServer?: McpServerRef, cwd?: string, agent?: { agent_id?: string; agent_type?: string }): Promise<Decision> {
    const log = this.conn.config.logger;
    const timeout = this.conn.config.decisionTimeoutMs;
    const deadline = Date.now() + timeout;
    if (typeof toolInput !== 'object' || toolInput === null || Array.isArray(toolInput)) {
      return { decision: 'deny', reason: `the input of ${toolName} is not an object, so gatekeeper cannot judge it`, rule: 'client.malformed_input' };
    }
    let d: Decision;
    try {
      const queryId = await this.ensureOpen(deadline);
      const frame = {
        type: 'decide' as const,
        query_id: queryId,
        event,
        tool_name: toolName,
        tool_input: toolInput as Record<string, unknown>,
        tool_use_id: toolUseId,
        ...(mcpServer ? { mcp_server: mcpServer } : {}),
        ...(cwd !== undefined && cwd.startsWith('/') ? { cwd } : {}),
        ...(typeof agent?.agent_id === 'string' && agent.agent_id !== '' ? { agent_id: agent.agent_id } : {}),
        ...(typeof agent?.agent_type === 'string' && agent.agent_type !== '' ? { agent_type: agent.agent_type } : {}),
      };
      const reply = await this.conn.request(frame, { deadline, generation: this.queryGen });
      d = this.toDecision(reply, toolUseId);
    } catch (err) {
      d = unavailableDecision(describe(err, timeout));
    }
    const fields = { event, tool: toolName, tool_use_id: toolUseId, decision: d.decision, rule: d.rule };
    if (d.rule.startsWith('client.')) log.warn?.('gatekeeper: failed closed', { ...fields, reason: d.reason });
    else log.debug?.('gatekeeper: decided', fields);
    return d;
  }

  /**
   * run asks the sidecar to run code for a tool use it already allowed, and
   * waits for its result. It throws GatekeeperError for a refused run
   * (`run_denied`, `runner_unavailable`, …) and UnavailableError when the
   * sidecar cannot be asked or goes away.
   */
  async run(toolUseId: string, args: RunArgs, onOutput?: (stream: 'stdout' | 'stderr', data: string) => void): Promise<RunResultReply> {
    const queryId = await this.ensureOpen(Date.now() + this.conn.config.decisionTimeoutMs);
    const frame: Omit<RunFrame, 'id'> = {
      type: 'run',
      query_id: queryId,
      tool_use_id: toolUseId,
      language: args.language,
      code: args.code,
    };
    if (args.files !== undefined) frame.files = args.files;
    if (args.outputs !== undefined) frame.outputs = args.outputs;
    if (args.to_agent !== undefined) frame.to_agent = args.to_agent;
    if (args.timeout_s !== undefined) frame.timeout_ms = Math.max(1, Math.ceil(args.timeout_s * 1000));
    const runMs = frame.timeout_ms ?? policyTimeoutMs(this.effective) ?? RUN_DEFAULT_MS;
    const reply = await this.conn.request(frame, {
      deadline: Date.now() + runMs + RUN_SLACK_MS,
      generation: this.queryGen,
      ...(onOutput ? { onOutput: (o) => onOutput(o.stream, o.data) } : {}),
    });
    if (reply.type === 'run_result') return reply;
    if (reply.type === 'error') throw new GatekeeperError(reply.code, reply.message, reply.violations ?? [], reply.rule);
    throw new MalformedReplyError(`a run was answered with ${reply.type}`);
  }

  /**
   * close closes the query on the sidecar (best effort, bounded) and lets go
   * of the connection. Later decisions deny. Calling it again does nothing.
   */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    const id = this.queryId;
    const gen = this.queryGen;
    this.queryId = undefined;
    for (const c of [...this.calls.values(), ...this.asks.values()]) c.abort();
    this.calls.clear();
    this.asks.clear();
    try {
      if (id !== undefined) {
        await this.conn.request({ type: 'close_query', query_id: id }, { deadline: Date.now() + CLOSE_TIMEOUT_MS, generation: gen });
      }
    } catch (err) {
      this.conn.config.logger.debug?.('gatekeeper: close_query failed', { error: (err as Error).message });
    } finally {
      this.conn.release();
    }
  }

  /**
   * onServerFrame runs a tool_call with the tool's own handler and answers
   * it on the connection it came on, bounded by its timeout_ms; a
   * tool_cancel (or close) aborts it, and a call answered after that sends
   * nothing. A call for another query, or for a tool this query did not
   * declare, is answered with an error: the sidecar fails it closed.
   */
  private onServerFrame(f: ServerFrame, gen: number): void {
    if (f.type === 'approval_request' || f.type === 'approval_cancel') {
      this.onAsk(f, gen);
      return;
    }
    if (f.type === 'tool_cancel') {
      this.calls.get(f.id)?.abort();
      this.calls.delete(f.id);
      return;
    }
    const fail = (error: string): void => this.conn.answer({ type: 'tool_result', id: f.id, error }, gen);
    const tools = this.tools;
    if (tools === undefined || this.closed || f.query_id !== this.queryId || gen !== this.queryGen) {
      fail(`query ${JSON.stringify(f.query_id)} declared no in-process tools on this connection`);
      return;
    }
    const ctl = new AbortController();
    this.calls.set(f.id, ctl);
    const timer = setTimeout(() => ctl.abort(), Math.max(1, f.timeout_ms));
    tools
      .call(f.server, f.tool, f.arguments, ctl.signal, f.id)
      .then(
        (result) => {
          if (!ctl.signal.aborted) this.conn.answer({ type: 'tool_result', id: f.id, result }, gen);
        },
        (err: unknown) => {
          if (!ctl.signal.aborted) fail(err instanceof Error ? err.message || String(err) : String(err));
        },
      )
      .finally(() => {
        clearTimeout(timer);
        if (this.calls.get(f.id) === ctl) this.calls.delete(f.id);
      });
  }

  /**
   * onAsk answers an approval_request with the approver, on the connection
   * it came on, bounded by its timeout_ms; an approval_cancel (or close)
   * aborts the handler's signal, and nothing is sent after that. An ask
   * for another query, or with no approver, is denied.
   */
  private onAsk(f: Extract<ServerFrame, { type: 'approval_request' | 'approval_cancel' }>, gen: number): void {
    if (f.type === 'approval_cancel') {
      this.asks.get(f.id)?.abort();
      this.asks.delete(f.id);
      return;
    }
    const approver = this.approver;
    if (approver === undefined || this.closed || f.query_id !== this.queryId || gen !== this.queryGen) {
      this.conn.answer({ type: 'approval', id: f.id, decision: 'deny', message: `query ${JSON.stringify(f.query_id)} has no handler for asks on this connection` }, gen);
      return;
    }
    const ctl = new AbortController();
    this.asks.set(f.id, ctl);
    const timer = setTimeout(() => ctl.abort(), Math.max(1, f.timeout_ms));
    approver(f, ctl.signal)
      .then((a) => {
        if (!ctl.signal.aborted) this.conn.answer({ type: 'approval', id: f.id, decision: a.decision, ...(a.message ? { message: a.message } : {}) }, gen);
      })
      .finally(() => {
        clearTimeout(timer);
        if (this.asks.get(f.id) === ctl) this.asks.delete(f.id);
      });
  }

  private toDecision(reply: Reply, toolUseId: string): Decision {
    if (reply.type === 'decision') {
      if (reply.tool_use_id !== undefined && reply.tool_use_id !== toolUseId) {
        return unavailableDecision(`it answered for tool use ${JSON.stringify(reply.tool_use_id)} instead of ${JSON.stringify(toolUseId)}`);
      }
      return { decision: reply.decision, reason: reply.reason, rule: reply.rule };
    }
    if (reply.type === 'error') {
      if (reply.code === 'unknown_query') this.forget();
      return unavailableDecision(`it answered with error ${reply.code}: ${reply.message}`);
    }
    return unavailableDecision(`it answered a decide with a ${reply.type} frame`);
  }

  /** forget drops the query id so that the next request opens it again. */
  private forget(): void {
    this.queryId = undefined;
    this.queryGen = -1;
  }

  /** ensureOpen resolves with a query id valid on the current connection. */
  private async ensureOpen(deadline: number): Promise<string> {
    if (this.closed) throw new UnavailableError('the query was closed');
    if (this.rejected) throw this.rejected;
    const gen = await this.conn.waitReady(deadline);
    if (this.queryId !== undefined && this.queryGen === gen) return this.queryId;
    if (this.opening === undefined || this.opening.gen !== gen) {
      const p = this.open(gen, Math.max(deadline, Date.now() + OPEN_TIMEOUT_MS));
      this.opening = { gen, p };
      p.catch(() => undefined).finally(() => {
        if (this.opening?.p === p) this.opening = undefined;
      });
    }
    return withDeadline(this.opening.p, deadline);
  }

  private async open(gen: number, deadline: number): Promise<string> {
    const frame = {
      type: 'open_query' as const,
      ...(this.override !== undefined ? { sandbox_policy: this.override } : {}),
      ...(this.tools !== undefined ? { sdk_servers: this.tools.declared } : {}),
      ...(this.approver !== undefined ? { approvals: true } : {}),
    };
    const reply = await this.conn.request(frame, { deadline, generation: gen });
    if (reply.type === 'query_opened') {
      this.queryId = reply.query_id;
      this.queryGen = gen;
      this.effective = reply.effective_policy;
      this.toolDescription = reply.tool_description;
      this.conn.config.logger.info?.('gatekeeper: query opened', { query_id: reply.query_id, generation: gen });
      if (this.closed) void this.conn.request({ type: 'close_query', query_id: reply.query_id }, { deadline: Date.now() + CLOSE_TIMEOUT_MS }).catch(() => undefined);
      return reply.query_id;
    }
    if (reply.type === 'error') {
      const err = new GatekeeperError(
        reply.code,
        reply.code === 'policy_override_rejected'
          ? `gatekeeper rejected the sandbox policy override: ${(reply.violations ?? []).join('; ') || reply.message}`
          : `gatekeeper refused to open the query: ${reply.code}: ${reply.message}`,
        reply.violations ?? [],
        reply.rule,
      );
      if (reply.code === 'policy_override_rejected') this.rejected = err;
      throw err;
    }
    throw new MalformedReplyError(`open_query was answered with ${reply.type}`);
  }
}

/** policyTimeoutMs reads sandbox.proc.timeout (ms) from an effective policy. */
export function policyTimeoutMs(policy: Record<string, unknown> | undefined): number | undefined {
  const sandbox = policy?.sandbox;
  if (typeof sandbox !== 'object' || sandbox === null) return undefined;
  const proc = (sandbox as Record<string, unknown>).proc;
  if (typeof proc !== 'object' || proc === null) return undefined;
  const t = (proc as Record<string, unknown>).timeout;
  return typeof t === 'number' && Number.isFinite(t) && t > 0 ? t : undefined;
}

function withDeadline<T>(p: Promise<T>, deadline: number): Promise<T> {
  const ms = deadline - Date.now();
  if (ms <= 0) return Promise.reject(new UnavailableError('the decision deadline passed'));
  let timer: NodeJS.Timeout | undefined;
  const t = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new UnavailableError(`no answer within ${String(ms)} ms`)), ms);
  });
  return Promise.race([p, t]).finally(() => clearTimeout(timer));
}

function describe(err: unknown, timeoutMs: number): string {
  if (err instanceof GatekeeperError) {
    return err.code === 'policy_override_rejected'
      ? `the query's sandbox policy override is rejected: ${err.violations.join('; ') || err.message}`
      : `${err.code}: ${err.message}`;
  }
  if (err instanceof MalformedReplyError) return `it sent a malformed reply: ${err.message}`;
  if (err instanceof UnavailableError) {
    if (/within \d+ ms/.test(err.message)) return `no decision within ${String(timeoutMs)} ms: ${err.message}`;
    return err.message;
  }
  return String(err);
}
