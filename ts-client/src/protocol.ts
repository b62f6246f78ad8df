// Frames of the gatekeeper wire protocol, version 1 (docs/protocol.md), and
// the checks this client applies to every reply before trusting it.

/** The protocol version this client speaks. */
export const PROTOCOL_VERSION = 1;

/** The WebSocket path of the protocol. */
export const WS_PATH = '/v1/ws';

/**
 * ruleTag is how every text a model reads names the rule that decided:
 * `[gatekeeper rule: R]`. The Go declaration is gate/wire's RuleTag; both
 * are pinned to gate/wire/testdata/rule-text.json.
 */
export function ruleTag(rule: string): string {
  return `[gatekeeper rule: ${rule}]`;
}

/**
 * withRule returns text followed by a space and rule's tag, the form of a
 * deny, an ask or a refused run the model reads; with no rule (undefined
 * or ''), text alone. The Go declaration is gate/wire's WithRule.
 */
export function withRule(text: string, rule: string | undefined): string {
  return rule ? `${text} ${ruleTag(rule)}` : text;
}

/** A decision the sidecar can return. */
export type DecisionKind = 'allow' | 'deny' | 'ask';

/** Which SDK callback asks for a decision. */
export type DecideEvent = 'PreToolUse' | 'canUseTool';

/** How an MCP server was configured, as the protocol names it. */
export type McpSource = 'sdk' | 'stdio' | 'sse' | 'http' | 'unknown';

/** The `mcp_server` field of a `decide` frame. */
export interface McpServerRef {
  name: string;
  source: McpSource;
}

export interface HelloFrame {
  type: 'hello';
  id: string;
  v: number;
  client: string;
}

export interface OpenQueryFrame {
  type: 'open_query';
  id: string;
  sandbox_policy?: Record<string, unknown>;
  /** The caller's in-process MCP servers whose tools sandboxed code may call (if the policy lets it). */
  sdk_servers?: SdkServerDecl[];
  /** This client answers the policy's asks on the nested calls of the query's runs (approval_request → approval). */
  approvals?: boolean;
}

/** One in-process MCP server in open_query's sdk_servers (gate/wire's SDKServer). */
export interface SdkServerDecl {
  name: string;
  description?: string;
  tools: SdkToolDecl[];
}

/** One tool of an SdkServerDecl, in MCP's names (gate/wire's SDKTool). */
export interface SdkToolDecl {
  name: string;
  description?: string;
  inputSchema?: Record<string, unknown>;
  outputSchema?: Record<string, unknown>;
  annotations?: { readOnlyHint?: boolean; destructiveHint?: boolean; idempotentHint?: boolean; openWorldHint?: boolean };
}

/** The answer to a tool_call: exactly one of result (an MCP CallToolResult) and error. */
export interface ToolResultFrame {
  type: 'tool_result';
  id: string;
  result?: Record<string, unknown>;
  error?: string;
}

export interface DecideFrame {
  type: 'decide';
  id: string;
  query_id: string;
  event: DecideEvent;
  tool_name: string;
  tool_input: Record<string, unknown>;
  tool_use_id: string;
  mcp_server?: McpServerRef;
  /** The agent's working directory: where its tools resolve relative paths. */
  cwd?: string;
  /** The subagent making the call (the hook input's agent_id, agent_type). */
  agent_id?: string;
  agent_type?: string;
}

/** The content of a file a run sends in: its text, or any bytes in standard base64. */
export type RunFileContent = string | { base64: string };

export interface RunFrame {
  type: 'run';
  id: string;
  query_id: string;
  tool_use_id: string;
  language: 'python' | 'sh' | 'node';
  code: string;
  files?: Record<string, RunFileContent>;
  timeout_ms?: number;
  /** Paths under /workspace whose files the run returns, changed or not; absent: the files it created or changed. */
  outputs?: string[];
  /** Returned files for the agent's code only (paths, directories or path.Match patterns); the model reads a handle. */
  to_agent?: string[];
}

export interface CloseQueryFrame {
  type: 'close_query';
  id: string;
  query_id: string;
}

/** The answer to an approval_request: allow or deny, with the handler's message. */
export interface ApprovalFrame {
  type: 'approval';
  id: string;
  decision: 'allow' | 'deny';
  /** At most 4096 characters; a deny's message reaches the model. */
  message?: string;
}

export type RequestFrame = HelloFrame | OpenQueryFrame | DecideFrame | RunFrame | CloseQueryFrame | ToolResultFrame | ApprovalFrame;

/** A request frame before the connection gives it an id. */
export type UnsentFrame = RequestFrame extends infer F ? (F extends RequestFrame ? Omit<F, 'id'> : never) : never;

export interface WelcomeReply {
  type: 'welcome';
  id: string;
  v: number;
  server: string;
  policy_revision: string;
}

export interface QueryOpenedReply {
  type: 'query_opened';
  id: string;
  query_id: string;
  policy_hash: string;
  effective_policy: Record<string, unknown>;
  /** The run tool's description when the query's code may call MCP tools; absent: SANDBOX_DESCRIPTION. */
  tool_description?: string;
}

export interface DecisionReply {
  type: 'decision';
  id: string;
  decision: DecisionKind;
  reason: string;
  rule: string;
  decision_id?: string;
  policy_revision?: string;
  tool_use_id?: string;
}

export interface OutputReply {
  type: 'output';
  id: string;
  run_id: string;
  stream: 'stdout' | 'stderr';
  data: string;
}

export interface RunResultReply {
  type: 'run_result';
  id: string;
  run_id?: string;
  exit_code: number;
  /** Why the run ended: `exited`, `timed_out`, `oom_killed` or `cancelled`. */
  reason: string;
  stdout: string;
  stderr: string;
  truncated: boolean;
  /** Derived from `reason` by the sidecar (`reason === 'timed_out'`). */
  timed_out: boolean;
  /** Derived from `reason` by the sidecar (`reason === 'oom_killed'`). */
  oom_killed: boolean;
  duration_ms?: number;
  peak_memory_bytes?: number;
  image?: string;
  runtime?: string;
  /** Files of /workspace the run returned, sorted by path. */
  files?: RunFileReply[];
  /** Files past the policy's sandbox.output.max_files. */
  files_omitted?: number;
  /** `saved`, `not_saved` (see workspace_note) or `` (the sidecar keeps no workspace). */
  workspace?: string;
  workspace_note?: string;
  /** The nested calls the program made through code mode's bridge, each decided and audited; 0 when it could call none. */
  tool_calls?: number;
  /** The run's session, for a run in one (the query's policy turned sessions on); absent for a single-use run. */
  session?: RunSessionReply;
  /** Set when the run found its session's state gone, or lost it in this run; only for a run in a session. */
  state_lost?: StateLostReply;
}

/**
 * SESSION_END_REASONS are why a session ends, in the order of the one
 * declaration, runner.SessionEndReasons (runner/session.go); a test pins
 * this copy to it. Every reason but `closed` (the query was closed) is
 * also a StateLostReply's.
 */
export const SESSION_END_REASONS = [
  'closed',
  'expired',
  'max_lifetime',
  'policy_changed',
  'timed_out',
  'oom_killed',
  'interpreter_exited',
  'cancelled',
  'sandbox_lost',
  'evicted',
] as const;

/** Why a session ended (SESSION_END_REASONS). */
export type SessionEndReason = (typeof SESSION_END_REASONS)[number];

/** A run_result's `session`: the run's session as it stood when the run began (runner.SessionInfo). */
export interface RunSessionReply {
  /** This run's number in its session, from 1. */
  run: number;
  /** When the session's sandbox started (RFC 3339, UTC, milliseconds). */
  started_at?: string;
  /** How old the session was when this run began. */
  age_ms?: number;
  /** How long the session had waited for this run. */
  idle_ms?: number;
  /** How many sessions of this query ended before this one other than by closing it. */
  restarts?: number;
  /** The session's peak memory so far (0: unknown). */
  peak_memory_bytes?: number;
}

/** A run_result's `state_lost` (runner.StateLost). */
export interface StateLostReply {
  /** Why the session ended: one of SESSION_END_REASONS but `closed` (a newer sidecar may add one). */
  reason: Exclude<SessionEndReason, 'closed'> | (string & {});
  /** What is gone, in words for a model. */
  lost: string;
  /**
   * true: this run ran in a fresh session, because the old one ended
   * before it (expired, max_lifetime, policy_changed, evicted, ...); false:
   * this run's own session ended in it, and the next run starts afresh.
   */
  fresh: boolean;
}

/** The fields of a run_result's session, as RUN_RESULT_REQUIRED for a run_result. */
export const RUN_SESSION_REQUIRED = { run: 'number' } as const satisfies Record<string, FieldType>;

/** See RUN_SESSION_REQUIRED. */
export const RUN_SESSION_OPTIONAL = {
  started_at: 'string',
  age_ms: 'number',
  idle_ms: 'number',
  restarts: 'number',
  peak_memory_bytes: 'number',
} as const satisfies Record<string, FieldType>;

/** The fields of a run_result's state_lost. */
export const STATE_LOST_REQUIRED = { reason: 'string', lost: 'string', fresh: 'boolean' } as const satisfies Record<string, FieldType>;

type RunSessionField = keyof RunSessionReply;
type DeclaredRunSessionField = keyof typeof RUN_SESSION_REQUIRED | keyof typeof RUN_SESSION_OPTIONAL;
/** A field of RunSessionReply missing from the tables above, or the other way round, breaks the build here. */
const runSessionFieldsDeclared: [RunSessionField] extends [DeclaredRunSessionField] ? ([DeclaredRunSessionField] extends [RunSessionField] ? true : never) : never = true;
void runSessionFieldsDeclared;
/** Likewise for StateLostReply. */
const stateLostFieldsDeclared: [keyof StateLostReply] extends [keyof typeof STATE_LOST_REQUIRED] ? ([keyof typeof STATE_LOST_REQUIRED] extends [keyof StateLostReply] ? true : never) : never = true;
void stateLostFieldsDeclared;

/** One file a run returned; exactly one of text, base64 and omitted is set. */
export interface RunFileReply {
  path: string;
  size: number;
  sha256: string;
  /** `created`, `modified` or `unchanged` (named in outputs). */
  change: string;
  media_type: string;
  text?: string;
  base64?: string;
  /** Why the content is left out. */
  omitted?: string;
  /** Returned to the agent's code only (the run's to_agent): never shown to the model; its content is in base64. */
  to_agent?: boolean;
}

/** The fields of a returned file, as RUN_RESULT_REQUIRED for a run_result. */
export const RUN_FILE_REQUIRED = {
  path: 'string',
  size: 'number',
  sha256: 'string',
  change: 'string',
  media_type: 'string',
} as const satisfies Record<string, FieldType>;

/** See RUN_FILE_REQUIRED. */
export const RUN_FILE_OPTIONAL = {
  text: 'string',
  base64: 'string',
  omitted: 'string',
  to_agent: 'boolean',
} as const satisfies Record<string, FieldType>;

type RunFileField = keyof RunFileReply;
type DeclaredRunFileField = keyof typeof RUN_FILE_REQUIRED | keyof typeof RUN_FILE_OPTIONAL;
/** A field of RunFileReply missing from the tables above, or the other way round, breaks the build here. */
const runFileFieldsDeclared: [RunFileField] extends [DeclaredRunFileField] ? ([DeclaredRunFileField] extends [RunFileField] ? true : never) : never = true;
void runFileFieldsDeclared;

/**
 * The fields of a run_result frame besides `type` and `id`, with their JSON
 * types: those parseReply requires, and those it checks when present. A
 * test pins them to the frames the sidecar's Go codec writes
 * (gate/wire/testdata/golden), and the compiler to RunResultReply.
 */
export const RUN_RESULT_REQUIRED = {
  exit_code: 'number',
  reason: 'string',
  stdout: 'string',
  stderr: 'string',
  truncated: 'boolean',
  timed_out: 'boolean',
  oom_killed: 'boolean',
} as const satisfies Record<string, FieldType>;

/** See RUN_RESULT_REQUIRED. */
export const RUN_RESULT_OPTIONAL = {
  run_id: 'string',
  duration_ms: 'number',
  peak_memory_bytes: 'number',
  image: 'string',
  runtime: 'string',
  files: 'object[]',
  files_omitted: 'number',
  workspace: 'string',
  workspace_note: 'string',
  tool_calls: 'number',
} as const satisfies Record<string, FieldType>;

/** The optional fields of a run_result present only for a run in a session; the sidecar sends every other field on every run_result. */
export const RUN_RESULT_SESSION_ONLY = {
  session: 'object',
  state_lost: 'object',
} as const satisfies Record<string, FieldType>;

type RunResultField = Exclude<keyof RunResultReply, 'type' | 'id'>;
type DeclaredRunResultField = keyof typeof RUN_RESULT_REQUIRED | keyof typeof RUN_RESULT_OPTIONAL | keyof typeof RUN_RESULT_SESSION_ONLY;
/** A field of RunResultReply missing from the tables above, or the other way round, breaks the build here. */
const runResultFieldsDeclared: [RunResultField] extends [DeclaredRunResultField] ? ([DeclaredRunResultField] extends [RunResultField] ? true : never) : never = true;
void runResultFieldsDeclared;

export interface QueryClosedReply {
  type: 'query_closed';
  id: string;
  query_id: string;
}

/** The sidecar relays a nested call to one of this query's in-process tools; answer with a tool_result of the same id. */
export interface ToolCallReply {
  type: 'tool_call';
  id: string;
  query_id: string;
  server: string;
  tool: string;
  arguments: Record<string, unknown>;
  /** How long the sidecar waits for the answer. */
  timeout_ms: number;
}

/** The sidecar no longer waits for the tool_call of this id: stop it; an answer is dropped. */
export interface ToolCancelReply {
  type: 'tool_cancel';
  id: string;
  query_id: string;
}

/**
 * The policy asked before a nested call of sandboxed code: the sidecar asks
 * this client, which answers with an approval of the same id within
 * timeout_ms (docs/protocol.md, "Asks from code").
 */
export interface ApprovalRequestReply {
  type: 'approval_request';
  id: string;
  query_id: string;
  /** The run whose program made the call. */
  run_id: string;
  /** The model's tool use of that sandboxed_code run. */
  tool_use_id: string;
  language: string;
  server: string;
  tool: string;
  /** The tool's MCP name, mcp__server__tool. */
  tool_name: string;
  /** "policy" (an operator's server) or "sdk" (one of this client's in-process servers). */
  server_source: string;
  arguments: Record<string, unknown>;
  /** The call's 1-based number within its run. */
  call_seq: number;
  rule: string;
  reason: string;
  timeout_ms: number;
}

/** The sidecar no longer waits for the approval_request of this id: the call was denied. */
export interface ApprovalCancelReply {
  type: 'approval_cancel';
  id: string;
  query_id: string;
}

export interface ErrorReply {
  type: 'error';
  id: string;
  code: string;
  message: string;
  violations?: string[];
  rule?: string;
}

export type Reply =
  | WelcomeReply
  | QueryOpenedReply
  | DecisionReply
  | OutputReply
  | RunResultReply
  | QueryClosedReply
  | ErrorReply
  | ToolCallReply
  | ToolCancelReply
  | ApprovalRequestReply
  | ApprovalCancelReply;

/** MalformedReplyError says a frame from the sidecar broke the protocol. */
export class MalformedReplyError extends Error {
  override name = 'MalformedReplyError';
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/** The JSON type of a frame field, as parseReply checks it. */
export type FieldType = 'string' | 'number' | 'boolean' | 'object' | 'string[]' | 'object[]';

/** hasType reports whether a field's value v is of JSON type t. */
export function hasType(v: unknown, t: FieldType): boolean {
  switch (t) {
    case 'string[]':
      return Array.isArray(v) && v.every((x) => typeof x === 'string');
    case 'object[]':
      return Array.isArray(v) && v.every(isObject);
    case 'object':
      return isObject(v);
    case 'number':
      return typeof v === 'number' && Number.isFinite(v);
    default:
      return typeof v === t;
  }
}

function check(frame: Record<string, unknown>, required: Record<string, FieldType>, optional: Record<string, FieldType> = {}): void {
  const has = (k: string): boolean => Object.prototype.hasOwnProperty.call(frame, k);
  for (const [k, t] of Object.entries(required)) {
    if (!has(k)) throw new MalformedReplyError(`${String(frame.type)} frame lacks ${k}`);
    if (!hasType(frame[k], t)) throw new MalformedReplyError(`${String(frame.type)} frame has ${k} of the wrong type`);
  }
  for (const [k, t] of Object.entries(optional)) {
    if (has(k) && !hasType(frame[k], t)) throw new MalformedReplyError(`${String(frame.type)} frame has ${k} of the wrong type`);
  }
}

/**
 * parseReply decodes one text frame from the sidecar and checks that it is a
 * well-formed reply: a JSON object with a known `type`, a string `id` and the
 * fields its type requires, each of its documented JSON type. Fields the
 * protocol may add later are tolerated. It throws MalformedReplyError.
 */
export function parseReply(text: string): Reply {
  let v: unknown;
  try {
    v = JSON.parse(text);
  } catch {
    throw new MalformedReplyError('frame is not JSON');
  }
  if (!isObject(v)) throw new MalformedReplyError('frame is not a JSON object');
  if (typeof v.type !== 'string') throw new MalformedReplyError('frame has no string type');
  if (typeof v.id !== 'string') throw new MalformedReplyError(`${v.type} frame has no string id`);
  switch (v.type) {
    case 'welcome':
      check(v, { v: 'number', server: 'string' }, { policy_revision: 'string' });
      break;
    case 'query_opened':
      check(v, { query_id: 'string', effective_policy: 'object' }, { policy_hash: 'string', tool_description: 'string' });
      if (v.query_id === '') throw new MalformedReplyError('query_opened frame has an empty query_id');
      break;
    case 'decision':
      check(v, { decision: 'string', reason: 'string', rule: 'string' }, {
        decision_id: 'string',
        policy_revision: 'string',
        tool_use_id: 'string',
      });
      if (v.decision !== 'allow' && v.decision !== 'deny' && v.decision !== 'ask') {
        throw new MalformedReplyError(`decision frame has unknown decision ${JSON.stringify(v.decision)}`);
      }
      break;
    case 'output':
      check(v, { stream: 'string', data: 'string' }, { run_id: 'string' });
      if (v.stream !== 'stdout' && v.stream !== 'stderr') throw new MalformedReplyError('output frame has an unknown stream');
      break;
    case 'run_result':
      check(v, RUN_RESULT_REQUIRED, { ...RUN_RESULT_OPTIONAL, ...RUN_RESULT_SESSION_ONLY });
      if (v.session !== undefined) check({ ...(v.session as Record<string, unknown>), type: 'run_result session' }, RUN_SESSION_REQUIRED, RUN_SESSION_OPTIONAL);
      if (v.state_lost !== undefined) check({ ...(v.state_lost as Record<string, unknown>), type: 'run_result state_lost' }, STATE_LOST_REQUIRED);
      for (const f of (v.files ?? []) as Record<string, unknown>[]) {
        check({ ...f, type: 'run_result file' }, RUN_FILE_REQUIRED, RUN_FILE_OPTIONAL);
        if ([f.text, f.base64, f.omitted].filter((x) => x !== undefined).length !== 1) {
          throw new MalformedReplyError('run_result file has not exactly one of text, base64 and omitted');
        }
      }
      break;
    case 'query_closed':
      check(v, {}, { query_id: 'string' });
      break;
    case 'error':
      check(v, { code: 'string', message: 'string' }, { violations: 'string[]', rule: 'string' });
      break;
    case 'tool_call':
      check(v, { query_id: 'string', server: 'string', tool: 'string', arguments: 'object', timeout_ms: 'number' });
      break;
    case 'tool_cancel':
      check(v, { query_id: 'string' });
      break;
    case 'approval_request':
      check(v, {
        query_id: 'string', run_id: 'string', tool_use_id: 'string', language: 'string', server: 'string', tool: 'string', tool_name: 'string',
        server_source: 'string', arguments: 'object', call_seq: 'number', rule: 'string', reason: 'string', timeout_ms: 'number',
      });
      break;
    case 'approval_cancel':
      check(v, { query_id: 'string' });
      break;
    default:
      throw new MalformedReplyError(`unknown frame type ${JSON.stringify(v.type)}`);
  }
  return v as unknown as Reply;
}

/** The name of gatekeeper's MCP server. */
export const SANDBOX_SERVER = 'sandboxed_code';
/** The name of the run tool as the model sees it. */
export const RUN_TOOL = `mcp__${SANDBOX_SERVER}__run`;

/**
 * GatekeeperError is an answer of the sidecar that ends a request: an
 * `error` frame. A sandbox policy override beyond the operator's ceilings
 * gives `code: "policy_override_rejected"` with every violation listed.
 */
export class GatekeeperError extends Error {
  override name = 'GatekeeperError';
  /** The protocol's error code, such as `policy_override_rejected`. */
  readonly code: string;
  /** For `policy_override_rejected`: every violation, one sentence each. */
  readonly violations: readonly string[];
  /** For `run_denied`: the rule that refused the run. */
  readonly rule: string | undefined;

  constructor(code: string, message: string, violations: readonly string[] = [], rule?: string) {
    super(message);
    this.code = code;
    this.violations = violations;
    this.rule = rule;
  }
}

/** The arguments of the sandboxed_code run tool. */
export interface RunArgs {
  language: RunFrame['language'];
  code: string;
  files?: Record<string, RunFileContent> | undefined;
  timeout_s?: number | undefined;
  outputs?: string[] | undefined;
  to_agent?: string[] | undefined;
}
