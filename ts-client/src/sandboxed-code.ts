// The in-process MCP server `sandboxed_code` with its one tool `run`
// (mcp__sandboxed_code__run): the model's way to run code, in gatekeeper's
// Docker sandbox, under the query's effective sandbox policy.

import { createSdkMcpServer, tool, type McpSdkServerConfigWithInstance, type SdkMcpToolDefinition } from '@anthropic-ai/claude-agent-sdk';
import { z } from 'zod';
import type { GatekeeperLogger } from './config.js';
import type { RunResultReply } from './protocol.js';
import { GatekeeperError, type RunArgs, type SidecarQuery } from './session.js';

/** The name of gatekeeper's MCP server. */
export const SANDBOX_SERVER = 'sandboxed_code';
/** The name of the run tool as the model sees it. */
export const RUN_TOOL = `mcp__${SANDBOX_SERVER}__run`;
/** Where Claude Code puts the tool use id in a tools/call request. */
const TOOL_USE_ID_META = 'claudecode/toolUseId';
/** How many allowed-but-not-yet-run calls are remembered. */
const MAX_REMEMBERED = 256;

type CallToolResult = Awaited<ReturnType<SdkMcpToolDefinition['handler']>>;

const DESCRIPTION = [
  'Run a short program in an isolated sandbox (a container with no access to the host, resource limits, and',
  'usually no network) and get back its stdout, stderr and exit code.',
  'language: "python", "sh" or "node". files: optional text files to create first, paths relative to the',
  'working directory /workspace. timeout_s: optional wall-clock limit in seconds, at most the policy\'s limit.',
].join(' ');

const inputSchema = {
  language: z.enum(['python', 'sh', 'node']).describe('The interpreter: python, sh or node.'),
  code: z.string().describe('The program text.'),
  files: z.record(z.string(), z.string()).optional().describe('Files to create first: path relative to /workspace → text.'),
  timeout_s: z.number().positive().optional().describe('Wall-clock limit in seconds.'),
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
  return stableJson([o.language, o.code, o.files ?? null, o.timeout_s ?? null]);
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

/** formatRunResult is the text the model reads for a finished run. */
export function formatRunResult(r: RunResultReply): string {
  const lines = [`exit code ${String(r.exit_code)} (${r.reason})${r.duration_ms !== undefined ? ` after ${String(r.duration_ms)} ms` : ''}`];
  const flags = [r.truncated && 'output truncated', r.timed_out && 'timed out', r.oom_killed && 'killed: out of memory'].filter(Boolean);
  if (flags.length > 0) lines.push(`note: ${flags.join(', ')}`);
  lines.push(`truncated=${String(r.truncated)} timed_out=${String(r.timed_out)} oom_killed=${String(r.oom_killed)}`);
  lines.push(r.stdout === '' ? 'stdout: (empty)' : `stdout:\n${r.stdout}`);
  lines.push(r.stderr === '' ? 'stderr: (empty)' : `stderr:\n${r.stderr}`);
  return lines.join('\n');
}

function errorResult(text: string): CallToolResult {
  return { isError: true, content: [{ type: 'text', text }] };
}

/**
 * sandboxedCodeServer makes the `sandboxed_code` server of one query. Its
 * handler sends a `run` frame for the tool use gatekeeper allowed, and turns
 * every failure (a refused run, an unavailable sidecar or engine) into an
 * MCP error result the model can read; it never throws.
 */
export function sandboxedCodeServer(sq: SidecarQuery, runs: RunCorrelator, logger: GatekeeperLogger): McpSdkServerConfigWithInstance {
  const run = tool(
    'run',
    DESCRIPTION,
    inputSchema,
    async (args, extra): Promise<CallToolResult> => {
      let id = toolUseIdOf(extra);
      if (id !== undefined) runs.consume(id);
      else id = runs.take(args);
      if (id === undefined) {
        return errorResult('gatekeeper cannot tell which allowed tool call this run belongs to, so the code did not run');
      }
      const runArgs: RunArgs = { language: args.language, code: args.code, files: args.files, timeout_s: args.timeout_s };
      try {
        const r = await sq.run(id, runArgs, (stream, data) => logger.debug?.('gatekeeper: run output', { tool_use_id: id, stream, bytes: data.length }));
        return {
          content: [{ type: 'text', text: formatRunResult(r) }],
          structuredContent: {
            exit_code: r.exit_code,
            reason: r.reason,
            stdout: r.stdout,
            stderr: r.stderr,
            truncated: r.truncated,
            timed_out: r.timed_out,
            oom_killed: r.oom_killed,
            ...(r.duration_ms !== undefined ? { duration_ms: r.duration_ms } : {}),
          },
        };
      } catch (err) {
        if (err instanceof GatekeeperError) {
          const rule = err.rule ? ` [gatekeeper rule: ${err.rule}]` : '';
          const what = err.code === 'run_denied' ? 'gatekeeper refused to run the code' : `gatekeeper could not run the code (${err.code})`;
          return errorResult(`${what}: ${err.message}${rule}`);
        }
        logger.warn?.('gatekeeper: run failed', { tool_use_id: id, error: (err as Error).message });
        return errorResult(`gatekeeper is unavailable (${(err as Error).message}), so the code did not run`);
      }
    },
  );
  return createSdkMcpServer({ name: SANDBOX_SERVER, version: '0.1.0', alwaysLoad: true, tools: [run] });
}
