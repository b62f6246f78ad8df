// The in-process MCP server `sandboxed_code` with its one tool `run`
// (mcp__sandboxed_code__run): the model's way to run code, in gatekeeper's
// Docker sandbox, under the query's effective sandbox policy.

import { createSdkMcpServer, tool, type McpSdkServerConfigWithInstance, type SdkMcpToolDefinition } from '@anthropic-ai/claude-agent-sdk';
import { createHash } from 'node:crypto';
import { z } from 'zod';
import type { GatekeeperLogger } from './config.js';
import {
  GatekeeperError,
  SANDBOX_SERVER,
  withRule,
  type RunArgs,
  type RunResultReply,
  type RunSessionReply,
  type StateLostReply,
} from './protocol.js';
import type { SidecarQuery } from './session.js';
import { quote } from './untrusted.js';

/** Where Claude Code puts the tool use id in a tools/call request. */
const TOOL_USE_ID_META = 'claudecode/toolUseId';
/** How many allowed-but-not-yet-run calls are remembered. */
const MAX_REMEMBERED = 256;

type CallToolResult = Awaited<ReturnType<SdkMcpToolDefinition['handler']>>;

/**
 * SANDBOX_DESCRIPTION is the run tool's description when the query's code
 * may call no MCP tool; the Go declaration is gate/wire's
 * SandboxDescription, and both are pinned to
 * gate/wire/testdata/sandbox-tool.json. A query whose code may call tools
 * shows the sidecar's longer text (query_opened's tool_description).
 */
export const SANDBOX_DESCRIPTION = [
  'Run a short program in an isolated sandbox (a container with no access to the host, resource limits, and',
  'usually no network) and get back its stdout, stderr, exit code and the files it wrote (images are shown to you).',
  'language: "python", "sh" or "node".',
  'The working directory is /workspace; what a run leaves there is there for the next run of this conversation',
  '(a run that times out keeps none of its changes). Install packages into it (pip install --user, npm install) when',
  'the network policy allows their registry. files: optional files to create first, path relative to /workspace →',
  'text, or {"base64": "..."} for binary content. outputs: optional paths under /workspace whose files to return;',
  'by default the files the run created or changed come back (except hidden directories, node_modules and __pycache__).',
  'timeout_s: optional wall-clock limit in seconds, at most the policy\'s limit.',
].join(' ');

const inputSchema = {
  language: z.enum(['python', 'sh', 'node']).describe('The interpreter: python, sh or node.'),
  code: z.string().describe('The program text.'),
  files: z
    .record(z.string(), z.union([z.string(), z.object({ base64: z.string() }).strict()]))
    .optional()
    .describe('Files to create first: path relative to /workspace → text, or {"base64": "..."} for binary content.'),
  timeout_s: z.number().positive().optional().describe('Wall-clock limit in seconds.'),
  outputs: z.array(z.string()).optional().describe('Paths (files or directories) under /workspace whose files to return, changed or not.'),
  to_agent: z
    .array(z.string())
    .max(100)
    .optional()
    .describe(
      "Returned files (paths, directories or glob patterns under /workspace) to hand to the agent's own code instead of you: you get each one's name, size, sha256 and type, never its content. Use it for results the agent passes on rather than reads.",
    ),
};

/**
 * RunCorrelator remembers the calls of the run tool that gatekeeper
 * allowed, so that a handler that is not told its tool use id (Claude Code
 * passes it in `_meta["claudecode/toolUseId"]`; older ones may not) can
 * find it by its input: the oldest allowed call with the same input.
 */
export class RunCorrelator {
  private readonly entries: { readonly id: string; key: string }[] = [];

  /** allowed records an allowed call. */
  allowed(toolUseId: string, input: unknown): void {
    if (toolUseId === '') return;
    const known = this.entries.find((e) => e.id === toolUseId);
    if (known) {
      known.key = runKey(input); // allowed again, maybe for an updated input
      return;
    }
    this.entries.push({ id: toolUseId, key: runKey(input) });
    if (this.entries.length > MAX_REMEMBERED) this.entries.shift();
  }

  /** consume forgets a call whose id the handler was told. */
  consume(toolUseId: string): void {
    const i = this.entries.findIndex((e) => e.id === toolUseId);
    if (i >= 0) this.entries.splice(i, 1);
  }

  /** take finds (and forgets) the oldest allowed call with this input. */
  take(input: unknown): string | undefined {
    const key = runKey(input);
    const i = this.entries.findIndex((e) => e.key === key);
    if (i < 0) return undefined;
    const [e] = this.entries.splice(i, 1);
    return e?.id;
  }
}

function runKey(input: unknown): string {
  const o = (typeof input === 'object' && input !== null ? input : {}) as Record<string, unknown>;
  return stableJson([o.language, o.code, o.files ?? null, o.timeout_s ?? null, o.outputs ?? null, o.to_agent ?? null]);
}

/** stableJson serializes with sorted keys, dropping undefined as JSON does. */
export function stableJson(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) => {
    if (typeof x !== 'object' || x === null || Array.isArray(x)) return x;
    const o = x as Record<string, unknown>;
    return Object.fromEntries(Object.keys(o).sort().map((k) => [k, o[k]]));
  });
}

/** toolUseIdOf reads the tool use id Claude Code passes to an MCP handler. */
export function toolUseIdOf(extra: unknown): string | undefined {
  if (typeof extra !== 'object' || extra === null) return undefined;
  const meta = (extra as { _meta?: unknown })._meta;
  if (typeof meta !== 'object' || meta === null) return undefined;
  const id = (meta as Record<string, unknown>)[TOOL_USE_ID_META];
  return typeof id === 'string' && id !== '' ? id : undefined;
}

/** A file of a sandboxed run as the model reads it (in SandboxRunReport). */
export interface SandboxReportFile {
  /** Relative to /workspace. */
  path: string;
  size: number;
  /** `created`, `modified` or `unchanged`. */
  change: string;
  media_type: string;
  /** The file's text, whole or cut (see note). */
  text?: string;
  /** What the model is not shown, and why. */
  note?: string;
}

/**
 * SandboxRunReport is what the model reads for a finished run: the MCP
 * result's structuredContent, which Claude Code hands the model as JSON
 * (images it returned come as image blocks beside it).
 */
export interface SandboxRunReport
  extends Pick<RunResultReply, 'exit_code' | 'reason' | 'stdout' | 'stderr' | 'truncated' | 'timed_out' | 'oom_killed' | 'duration_ms' | 'files_omitted' | 'workspace' | 'workspace_note' | 'tool_calls'> {
  /** The files the run returned, when it returned any, as the model reads them. */
  files?: SandboxReportFile[];
  /**
   * Set when the run's session lost its state (a query with sessions on):
   * why, what is gone, and whether this run already ran in a fresh session
   * (`fresh: true`) or the next run will. The model should rebuild what it
   * kept in memory.
   */
  state_lost?: StateLostReply;
}

/** A file of a sandboxed run, for the agent builder (SandboxRun). */
export interface SandboxFile {
  /** Relative to /workspace. */
  path: string;
  size: number;
  /** Hex SHA-256 of the content. */
  sha256: string;
  /** `created`, `modified` or `unchanged`. */
  change: string;
  /** Such as `image/png` or `text/plain; charset=utf-8`. */
  mediaType: string;
  /** The content; undefined when the sidecar left it out (see omitted). */
  content?: Buffer;
  /** Why the content is left out (the run's budget of file content was spent). */
  omitted?: string;
  /** The model asked (to_agent) that this file go to the agent's code only: the model read its handle, never its content. */
  toAgent?: boolean;
}

/** SandboxRun is one finished run of the model's code, for `onSandboxRun`. */
export interface SandboxRun {
  /** The tool use id of the model's call. */
  toolUseId: string;
  /** The sidecar's run id, as in its audit log. */
  runId: string;
  /** What the model read. */
  report: SandboxRunReport;
  /** Every file the run returned, with its content. */
  files: SandboxFile[];
  /**
   * The run's session, when the query has one (its policy's
   * `sandbox.session.idle_timeout` is on): this run's number in it, the
   * session's age, idle time, restarts and peak memory. Undefined for a
   * single-use run. A loss of state is in `report.state_lost`.
   */
  session?: RunSessionReply;
}

/** The images a model can be shown, by media type. */
const IMAGE_TYPES = new Set(['image/png', 'image/jpeg', 'image/gif', 'image/webp']);
/** How many characters of one text file, and of all of them, the model reads inline. */
const INLINE_FILE_CHARS = 8000;
const INLINE_TOTAL_CHARS = 24000;

/** sandboxFiles decodes the files of a run_result for the agent builder. */
export function sandboxFiles(r: RunResultReply): SandboxFile[] {
  return (r.files ?? []).map((f) => {
    const out: SandboxFile = { path: f.path, size: f.size, sha256: f.sha256, change: f.change, mediaType: f.media_type };
    if (f.text !== undefined) out.content = Buffer.from(f.text, 'utf8');
    else if (f.base64 !== undefined) out.content = Buffer.from(f.base64, 'base64');
    if (f.omitted !== undefined) out.omitted = f.omitted;
    if (f.to_agent === true) out.toAgent = true;
    return out;
  });
}

/**
 * toAgentNote is the note the model reads, in place of the content, on a file
 * the run returned to the agent's code only: its digest, and whether agent
 * code (onSandboxRun) received it. gate/client/claudecode's ToAgentNote is the
 * same text.
 */
export function toAgentNote(sha256: string, delivered: boolean): string {
  const note = `kept from you for the agent's code (sha256 ${sha256})`;
  return delivered ? note : `${note}, but no agent code received it: this client passes files to none`;
}

/**
 * runReport is what the model reads for a finished run; delivered says that
 * the files the run returned to the agent's code only reached it.
 */
export function runReport(r: RunResultReply, delivered = false): SandboxRunReport {
  const report: SandboxRunReport = {
    exit_code: r.exit_code,
    reason: r.reason,
    stdout: r.stdout,
    stderr: r.stderr,
    truncated: r.truncated,
    timed_out: r.timed_out,
    oom_killed: r.oom_killed,
    ...(r.duration_ms !== undefined ? { duration_ms: r.duration_ms } : {}),
  };
  const files = r.files ?? [];
  if (files.length > 0) {
    let room = INLINE_TOTAL_CHARS;
    report.files = files.map((f) => {
      const out: SandboxReportFile = { path: f.path, size: f.size, change: f.change, media_type: f.media_type };
      if (f.to_agent === true) out.note = toAgentNote(f.sha256, delivered);
      else if (f.omitted !== undefined) out.note = `content not returned: ${f.omitted}`;
      else if (IMAGE_TYPES.has(f.media_type) && f.base64 !== undefined) out.note = 'shown to you as an image';
      else if (f.text !== undefined) {
        let n = Math.min(f.text.length, INLINE_FILE_CHARS, room);
        // Never cut a character in two (a surrogate pair).
        if (n > 0 && n < f.text.length && f.text.charCodeAt(n - 1) >= 0xd800 && f.text.charCodeAt(n - 1) <= 0xdbff) n -= 1;
        out.text = f.text.slice(0, n);
        room -= n;
        if (n < f.text.length) out.note = `only its first ${String(n)} of ${String(f.text.length)} characters are shown; read the rest with a run`;
      } else out.note = 'binary content, not shown';
      return out;
    });
  }
  if (r.files_omitted) report.files_omitted = r.files_omitted;
  if (r.workspace) report.workspace = r.workspace;
  if (r.workspace_note) report.workspace_note = r.workspace_note;
  if (r.tool_calls) report.tool_calls = r.tool_calls;
  if (r.state_lost) report.state_lost = { reason: r.state_lost.reason, lost: r.state_lost.lost, fresh: r.state_lost.fresh };
  return report;
}

/**
 * stateLostLine is formatRunResult's line for a run whose session lost its
 * state: why, what is gone, and what the model should do about it.
 */
function stateLostLine(s: StateLostReply): string {
  const next = s.fresh ? 'This run started in a fresh session: rebuild what it needs.' : 'The next run starts in a fresh session.';
  return `state lost (${s.reason}): ${s.lost}. ${next}`;
}

/** OutputPart is one fenced part of the text: its name (a quoted file name for a file) and the program's text. */
export interface OutputPart {
  name: string;
  text: string;
}

/**
 * outputFence is the fence of a result whose program text is parts: the first
 * 16 hex digits of SHA-256(seed + decimal n) for the first n = 0, 1, ... whose
 * fence no part's name or text contains, where seed is the SHA-256 of each part
 * as "<name's UTF-8 bytes>:<name><text's UTF-8 bytes>:<text>". The check makes
 * the fence absent by construction; the hash makes it depend on all of the
 * output, so a program cannot know it while it writes. gate/client/claudecode's
 * outputFence is the same function.
 */
export function outputFence(parts: OutputPart[]): string {
  const h = createHash('sha256');
  for (const p of parts) {
    for (const s of [p.name, p.text]) h.update(`${String(Buffer.byteLength(s, 'utf8'))}:${s}`, 'utf8');
  }
  const seed = h.digest();
  return firstAbsent(parts, (n) => createHash('sha256').update(seed).update(String(n)).digest('hex').slice(0, 16));
}

/** firstAbsent is candidate(n) for the least n that no part's name or text contains. */
export function firstAbsent(parts: OutputPart[], candidate: (n: number) => string): string {
  for (let n = 0; ; n++) {
    const c = candidate(n);
    if (!parts.some((p) => p.name.includes(c) || p.text.includes(c))) return c;
  }
}

/**
 * formatRunResult is the text the model reads for a finished run (hosts that
 * do not read structuredContent), exactly as `gatekeeper mcp` writes it
 * (gate/client/claudecode/testdata/run-results pins the two).
 *
 * Gatekeeper's fields come first, one line each, a file's name quoted so that
 * no name can add a line of its own. The program's text (stdout, stderr, the
 * text of returned files) follows, each part between a line "<<< F name" and a
 * line ">>> F name", where the fence F is one that none of the program's text
 * contains (outputFence): printed output cannot end its part early, and a line
 * it prints that looks like a field is inside the fence, where the model reads
 * it as the program's. A run whose session lost its state gets a line saying
 * so after the exit fields, before the output's (stateLostLine). A later
 * addition to the result adds a field line or a part here.
 */
export function formatRunResult(r: RunResultReply, delivered = false): string {
  const report = runReport(r, delivered);
  const fields = [`exit code ${String(r.exit_code)} (${r.reason})${r.duration_ms !== undefined ? ` after ${String(r.duration_ms)} ms` : ''}`];
  const flags = [r.truncated && 'output truncated', r.timed_out && 'timed out', r.oom_killed && 'killed: out of memory'].filter(Boolean);
  if (flags.length > 0) fields.push(`note: ${flags.join(', ')}`);
  fields.push(`truncated=${String(r.truncated)} timed_out=${String(r.timed_out)} oom_killed=${String(r.oom_killed)}`);
  if (report.state_lost) fields.push(stateLostLine(report.state_lost));
  const parts: OutputPart[] = [];
  for (const s of [{ name: 'stdout', text: r.stdout }, { name: 'stderr', text: r.stderr }]) {
    if (s.text === '') {
      fields.push(`${s.name}: (empty)`);
      continue;
    }
    fields.push(`${s.name}: below`);
    parts.push(s);
  }
  for (const f of report.files ?? []) {
    const name = `file ${quote(f.path)}`;
    let line = `${name} (${f.change}, ${String(f.size)} bytes, ${f.media_type})`;
    let sep = ': ';
    if (f.note !== undefined) {
      line += sep + f.note;
      sep = '; ';
    }
    if (f.text !== undefined && f.text !== '') {
      line += `${sep}text below`;
      parts.push({ name, text: f.text });
    }
    fields.push(line);
  }
  if (report.files_omitted) fields.push(`${String(report.files_omitted)} more files not returned (the policy's sandbox.output.max_files)`);
  if (report.workspace_note) fields.push(`workspace: ${report.workspace_note}`);
  if (report.tool_calls) fields.push(`tool calls: ${String(report.tool_calls)} (each decided by gatekeeper's policy)`);
  if (parts.length === 0) return fields.join('\n');
  const fence = outputFence(parts);
  fields.push(`the program's output follows, each part between a line "<<< ${fence} <part>" and a line ">>> ${fence} <part>"; no output contains ${fence}`);
  let text = fields.join('\n');
  for (const p of parts) {
    text += `\n<<< ${fence} ${p.name}\n${p.text}${p.text.endsWith('\n') ? '' : '\n'}>>> ${fence} ${p.name}`;
  }
  return text;
}

/** imageBlocks are the images a run returned, as MCP image content. */
function imageBlocks(r: RunResultReply): CallToolResult['content'] {
  return (r.files ?? [])
    .filter((f) => IMAGE_TYPES.has(f.media_type) && f.base64 !== undefined && f.to_agent !== true)
    .map((f) => ({ type: 'image' as const, data: f.base64 as string, mimeType: f.media_type }));
}

function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/**
 * sandboxedCodeServer makes the `sandboxed_code` server of one query, its
 * run tool described by description (the sidecar's tool_description for a
 * query whose code may call MCP tools, SANDBOX_DESCRIPTION otherwise). Its
 * handler sends a `run` frame for the tool use gatekeeper allowed, and turns
 * every failure (a refused run, an unavailable sidecar or engine) into an
 * MCP error result the model can read; it never throws.
 */
export function sandboxedCodeServer(
  sq: SidecarQuery,
  runs: RunCorrelator,
  logger: GatekeeperLogger,
  onSandboxRun?: (run: SandboxRun) => void | Promise<void>,
  description: string = SANDBOX_DESCRIPTION,
): McpSdkServerConfigWithInstance {
  const run = tool(
    'run',
    description,
    inputSchema,
    async (args, extra): Promise<CallToolResult> => {
      let id = toolUseIdOf(extra);
      if (id !== undefined) runs.consume(id);
      else id = runs.take(args);
      if (id === undefined) {
        return errorResult('gatekeeper cannot tell which allowed tool call this run belongs to, so the code did not run');
      }
      const runArgs: RunArgs = { language: args.language, code: args.code, files: args.files, timeout_s: args.timeout_s, outputs: args.outputs, to_agent: args.to_agent };
      let r: RunResultReply;
      try {
        r = await sq.run(id, runArgs, (stream, data) => logger.debug?.('gatekeeper: run output', { tool_use_id: id, stream, bytes: data.length }));
      } catch (err) {
        if (err instanceof GatekeeperError) {
          const what = err.code === 'run_denied' ? 'gatekeeper refused to run the code' : `gatekeeper could not run the code (${err.code})`;
          return errorResult(withRule(`${what}: ${err.message}`, err.rule));
        }
        logger.warn?.('gatekeeper: run failed', { tool_use_id: id, error: (err as Error).message });
        return errorResult(`gatekeeper is unavailable (${(err as Error).message}), so the code did not run`);
      }
      // Files for the agent's code only reach it through onSandboxRun; the
      // model reads that they did only when a handler took them.
      const delivered = onSandboxRun !== undefined;
      const report = runReport(r, delivered);
      if (onSandboxRun !== undefined) {
        try {
          await onSandboxRun({ toolUseId: id, runId: r.run_id ?? '', report, files: sandboxFiles(r), ...(r.session ? { session: r.session } : {}) });
        } catch (err) {
          logger.warn?.('gatekeeper: onSandboxRun threw; the model gets its result all the same', { tool_use_id: id, error: (err as Error).message });
        }
      }
      return {
        content: [...imageBlocks(r), { type: 'text', text: formatRunResult(r, delivered) }],
        structuredContent: report as unknown as Record<string, unknown>,
      };
    },
  );
  return createSdkMcpServer({ name: SANDBOX_SERVER, version: '0.1.0', alwaysLoad: true, tools: [run] });
}
