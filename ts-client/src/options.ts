// What gatekeeper adds to the Agent SDK's options: the PreToolUse hook and
// canUseTool callback that ask the sidecar, the sandboxed_code MCP server,
// Bash in disallowedTools, and the composition with the caller's own.

import { resolve as resolvePath } from 'node:path';
import type {
  CanUseTool,
  HookCallback,
  HookCallbackMatcher,
  HookEvent,
  HookJSONOutput,
  McpServerConfig,
  Options,
  PermissionRequestHookSpecificOutput,
  PermissionResult,
  PermissionUpdate,
  PreToolUseHookSpecificOutput,
} from '@anthropic-ai/claude-agent-sdk';
import { checkAgentConfiguration, checkServerNames, isolation, keptPermissionUpdates, normalizeServerName, workspaceRoot } from './agent-config.js';
import type { GatekeeperLogger } from './config.js';
import { withRule, type McpServerRef, type McpSource } from './protocol.js';
import { RUN_TOOL, SANDBOX_SERVER } from './protocol.js';
import { RunCorrelator, sandboxedCodeServer, stableJson, type SandboxRun } from './sandboxed-code.js';
import type { Decision, FirstOpen, SidecarQuery } from './session.js';

/**
 * SandboxPolicy is a per-query override: a partial `sandbox` section of the
 * operator's policy file, merged over the operator's base policy by the
 * sidecar, and a `code_calls` key that narrows the policy's code mode.
 * Anything beyond the operator's `ceilings` (or wider than its
 * `code_calls`) refuses the whole query (nothing is clamped). Lists
 * replace the base list.
 */
export interface SandboxPolicy {
  /** The sandbox's file system. */
  fs?: {
    /**
     * The image: a profile (`"python"`, `"python-data"`, `"node"`, `"minimal"`)
     * or an image reference with a tag, one of the operator's
     * `ceilings.images` unless it is the base policy's; `""` is `"python"`.
     */
    image?: string;
    /** The `/workspace` tmpfs. */
    workspace?: {
      /** Its size: bytes, or a string such as `"64m"` (binary units). */
      size?: number | string;
    };
    /** The `/tmp` tmpfs. */
    tmp?: {
      /** Its size: bytes, or a string such as `"64m"` (binary units). */
      size?: number | string;
    };
    /** A dependencies directory mounted read-only, as the policy file names it. */
    deps?: string;
    /** Glob patterns of host paths no file tool may touch, e.g. `"~/.ssh/**"`. */
    deny?: string[];
    /**
     * Glob patterns of host paths no write tool (Write, Edit, MultiEdit,
     * NotebookEdit) may create, change or move into; added to the operator's
     * list (an override can add entries, never drop one).
     */
    write_protect?: string[];
    /** Built-in write-protect groups the operator lifted; an override may not lift any more. */
    write_protect_allow?: string[];
  };
  /** The sandbox's network. */
  net?: {
    /** Whether the sandbox has a network at all. */
    enabled?: boolean;
    /** Hosts it may reach; must lie within the operator's `ceilings.net_hosts`. */
    allow?: string[];
    /** Hosts it may not reach. */
    deny?: string[];
    /**
     * Hosts whose HTTPS requests the sidecar's egress proxy terminates and
     * decides one by one (event `http_request`); an override may add hosts,
     * never drop one.
     */
    inspect?: string[];
    /**
     * Secrets (by name, from the policy's `secrets:`) the run may use but
     * never read: it sees a sentinel that the proxy swaps for the value in
     * requests to the secret's hosts. An override may add only names in the
     * operator's `ceilings.secrets`.
     */
    secrets?: string[];
    /** Bytes of a request body the policy sees: bytes, or a string such as `"1k"`. */
    body_preview?: number | string;
  };
  /** The sandboxed process. */
  proc?: {
    /** CPUs, e.g. `1` or `0.5`. */
    cpus?: number;
    /** Memory limit: bytes, or a string such as `"512m"`, `"1g"`. */
    memory?: number | string;
    /** Maximum number of processes. */
    pids?: number;
    /** Wall-clock limit of one run: milliseconds, or a string such as `"30s"`, `"1m30s"`. */
    timeout?: number | string;
    /** The OCI runtime, e.g. `"runc"` or `"runsc"`. */
    runtime?: string;
    /** The uid the code runs as. */
    user?: number;
  };
  /**
   * A session for this query: one sandbox kept for the query's runs, whose
   * interpreters keep their state from one run to the next (Python's
   * globals and imports, Node's top-level bindings, the shell's working
   * directory, environment and background jobs), as a notebook does. Off
   * unless the operator's policy or this override turns it on, within the
   * operator's `ceilings.session`. A run whose session ended (idle, too
   * old, a policy reload, a timeout or OOM kill that lost it) starts afresh
   * and its result says `state_lost`.
   */
  session?: {
    /**
     * Ends the session after this long without a run: milliseconds, or a
     * string such as `"5m"`. `0` or `"0s"` turns sessions off for this query
     * (every run in a sandbox of its own).
     */
    idle_timeout?: number | string;
    /** Ends the session this long after it started, between runs: milliseconds, or a string such as `"1h"`; at least idle_timeout. */
    max_lifetime?: number | string;
  };
  /** What comes back from a run. */
  output?: {
    /** Most bytes kept per stream: bytes, or a string such as `"1m"`. */
    max_bytes?: number | string;
    /** Most workspace files a run returns (and most files a run may send in). */
    max_files?: number;
    /** Most bytes of file content a run returns, all files together (and may send in): bytes, or a string such as `"4m"`. */
    max_files_bytes?: number | string;
  };
  /**
   * Code mode for this query: which tools of the operator's `mcp_servers`
   * and of your in-process servers (`createSdkMcpServer`) the model's code
   * may call, and how much. It may only narrow the policy's top-level
   * `code_calls` section (docs/SANDBOX.md, "Calls from code"); anything
   * wider refuses the query, naming the field.
   */
  code_calls?: {
    /**
     * Per server, globs of tool names code may call (`*` is the only
     * wildcard). Given, it replaces the policy's map; each entry must be one
     * of the policy's globs for that server, written as it is there, or a
     * plain tool name one of them matches.
     */
    callable?: Record<string, string[]>;
    /** Most calls one run may make, every outcome counted; at most the policy's. */
    max_calls?: number;
    /** Most calls of one run at once; at most the policy's. */
    max_in_flight?: number;
    /** Largest arguments of one call, as JSON: bytes, or a string such as `"64k"`; at most the policy's. */
    max_argument_bytes?: number | string;
    /** Largest result of one call, as JSON: bytes, or a string such as `"1m"`; at most the policy's. */
    max_result_bytes?: number | string;
    /** Time for one call, decision and server together: milliseconds, or a string such as `"10s"`; at most the policy's. */
    timeout?: number | string;
  };
}

/** The options gatekeeper reads besides the SDK's own. */
export interface GatekeeperOwnOptions {
  /**
   * This query's override of the operator's sandbox policy, checked by the
   * sidecar against the operator's ceilings before anything reaches the
   * model. A rejected override makes the query fail at its first step with
   * a GatekeeperError listing every violation.
   */
  sandboxPolicy?: SandboxPolicy;
  /**
   * Called with every finished run of the model's code (through
   * `mcp__sandboxed_code__run`): what the model read, and every file the
   * run returned with its content (a chart it drew, a report it wrote).
   * It is awaited before the model gets the run's result, so keep it
   * short; what it throws is logged and does not reach the model.
   *
   * It is also how files reach the agent's code without reaching the model:
   * a file the model names in the run tool's `to_agent` comes here with
   * `toAgent: true` and its bytes, while the model reads only its handle
   * (path, size, sha256, media type). Without this handler the model is
   * told that no agent code received such a file, and still never reads it.
   */
  onSandboxRun?: (run: SandboxRun) => void | Promise<void>;
  /**
   * Accept agent configuration that gatekeeper otherwise refuses: non-empty
   * `settingSources`, `strictMcpConfig: false`, `plugins`,
   * `projectConfigRoot`, a settings file path or unlisted settings keys,
   * sandbox settings naming programs, `extraArgs` beyond a short list,
   * `executableArgs`, subagent `memory`, environment variables that load
   * configuration, programs and PATH entries where the model can write,
   * persisted permission updates, and the query's `updateSettings` and
   * `reloadPlugins({addPlugins})`. The README's table lists them.
   *
   * What it costs: Claude Code then runs what that configuration says,
   * outside gatekeeper. A settings file's command hooks, a plugin's hooks
   * and a stdio MCP server are programs started on the host as the agent's
   * user, and a CLAUDE.md `@import` reads a file into the model's context
   * without a Read call. Whoever can write those files (the model, through
   * a Write gatekeeper allowed, or the repository the agent works on) then
   * runs code on the host. Turn it on only for configuration the model
   * cannot write, and keep the policy's write-protect list on.
   *
   * Defaults stay isolated with it: `settingSources` is still `[]`,
   * `strictMcpConfig` and `verbatimPrompts` still `true`, auto memory and
   * scheduled tasks off and shell commands asked for unless given; only the
   * `allowManagedHooksOnly` policy is left out. Nothing here unlocks
   * `bypassPermissions`, `allowDangerouslySkipPermissions`,
   * `permissionPromptToolName` or `disableAllHooks`.
   */
  trustAgentConfiguration?: boolean;
}

/** The PreToolUse matcher's hook timeout beyond the decision timeout, in seconds. */
const HOOK_TIMEOUT_SLACK_S = 5;

/**
 * checkCallerOptions refuses SDK options that would take tool calls out of
 * gatekeeper's hands or bring agent configuration in (see
 * agent-config.ts). It throws GatekeeperConfigError.
 */
export function checkCallerOptions(o: Options, trust = false, writable: readonly string[] = []): void {
  checkAgentConfiguration(o, trust, writable);
}

/** configSource says how an mcpServers entry is configured. */
export function configSource(cfg: unknown): McpSource {
  if (typeof cfg !== 'object' || cfg === null) return 'unknown';
  const c = cfg as { type?: unknown; command?: unknown; instance?: unknown };
  switch (c.type) {
    case 'sdk':
      return 'sdk';
    case undefined:
    case 'stdio':
      return typeof c.command === 'string' ? 'stdio' : 'unknown';
    case 'sse':
      return 'sse';
    case 'http':
      return 'http';
    default:
      return 'unknown';
  }
}

/**
 * McpSources knows how each MCP server of a query was configured, and names
 * the server of an `mcp__<server>__<tool>` call for the `decide` frame.
 */
export class McpSources {
  private byName = new Map<string, McpSource>();

  constructor(servers: Record<string, unknown>) {
    this.set(servers);
  }

  /** set replaces what is known (after Query.setMcpServers). */
  set(servers: Record<string, unknown>): void {
    this.byName = new Map(Object.entries(servers).map(([name, cfg]) => [name, configSource(cfg)]));
  }

  /**
   * of returns the `mcp_server` of a call, or undefined for a tool that is
   * not an MCP tool. `provenance` is what the SDK reports (hook input
   * `mcp_server`, canUseTool `mcpServer`); where it and the configuration
   * disagree, the source is `unknown`, never `sdk`.
   */
  of(toolName: string, provenance?: { name: string; source: string }): McpServerRef | undefined {
    if (!toolName.startsWith('mcp__')) return undefined;
    if (provenance && typeof provenance.name === 'string' && provenance.name !== '' && typeof provenance.source === 'string') {
      const configured = this.byName.get(provenance.name);
      let source: McpSource = 'unknown';
      if (provenance.source === 'sdk') {
        if (configured === 'sdk') source = 'sdk';
      } else if (provenance.source === 'dynamic' && configured !== undefined && configured !== 'sdk') {
        // A server the SDK passed to Claude Code: ours to describe.
        source = configured;
      }
      return { name: provenance.name, source };
    }
    // No provenance (an older Claude Code): match the tool name's prefix.
    let best: { name: string; source: McpSource } | undefined;
    for (const [name, source] of this.byName) {
      const prefix = `mcp__${normalizeServerName(name)}__`;
      if (toolName.startsWith(prefix) && (best === undefined || name.length > best.name.length)) best = { name, source };
    }
    if (best) return best;
    const rest = toolName.slice('mcp__'.length);
    const end = rest.indexOf('__');
    const name = end < 0 ? rest : rest.slice(0, end);
    return name === '' ? undefined : { name, source: 'unknown' };
  }
}

/** The rule of the deny for a canUseTool answer sent out of band. */
export const OUT_OF_BAND_RULE = 'client.out_of_band_answer';

function outOfBand(toolName: string): Decision {
  return {
    decision: 'deny',
    reason: `${toolName} is denied: the canUseTool handler answered out of band (it returned null), and gatekeeper can decide only an answer it sees`,
    rule: OUT_OF_BAND_RULE,
  };
}

/** forModel is the text the model reads for a deny or ask. */
export function forModel(d: Decision): string {
  return withRule(d.reason, d.rule);
}

/**
 * bashAllowed reads an effective policy: Bash stays available only when the
 * policy lists it in `tools.allow` or `tools.ask` and not in `tools.deny`.
 * No policy (an unreachable sidecar) keeps Bash out.
 */
export function bashAllowed(policy: Record<string, unknown> | undefined): boolean {
  const tools = policy?.tools;
  if (typeof tools !== 'object' || tools === null) return false;
  const list = (k: string): string[] => {
    const v = (tools as Record<string, unknown>)[k];
    return Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : [];
  };
  return (list('allow').includes('Bash') || list('ask').includes('Bash')) && !list('deny').includes('Bash');
}

/** What buildOptions returns. */
export interface Built {
  /** The options to give the SDK's query(). */
  options: Options;
  /** Adds our server to a setMcpServers argument (after checking its names). */
  withOurServer(servers: Record<string, McpServerConfig>): Record<string, McpServerConfig>;
}

/** What buildOptions composes. */
export interface BuildParams {
  /** The sidecar query every decision goes to. */
  sq: SidecarQuery;
  /** The caller's SDK options; they must have passed checkCallerOptions. */
  caller: Options;
  /** What opening the sidecar query gave. */
  first: FirstOpen;
  logger: GatekeeperLogger;
  decisionTimeoutMs: number;
  /** The caller's trustAgentConfiguration. */
  trust: boolean;
  /** Runs when the SDK query using these options ends (the SDK then closes its in-process MCP servers). */
  onSessionEnd?: () => void;
  /** The caller's onSandboxRun. */
  onSandboxRun?: (run: SandboxRun) => void | Promise<void>;
}

/**
 * buildOptions composes the caller's SDK options with gatekeeper's, bound to
 * one sidecar query. It checks the caller's options again now that the
 * sidecar has said where the model may write (the policy's
 * workspace_root), and throws GatekeeperConfigError for one that points
 * there (a PATH entry, a program, the Claude Code executable).
 */
export function buildOptions(p: BuildParams): Built {
  const { sq, caller, first, logger, decisionTimeoutMs, trust, onSessionEnd, onSandboxRun } = p;
  const root = workspaceRoot(first.effectivePolicy);
  if (root !== undefined) checkCallerOptions(caller, trust, [root]);
  const sources = new McpSources({ ...(caller.mcpServers ?? {}), [SANDBOX_SERVER]: { type: 'sdk' } });
  const runs = new RunCorrelator();
  const server = sandboxedCodeServer(sq, runs, logger, onSandboxRun, first.toolDescription);

  // Where Claude Code resolves relative paths: the hook input says so; the
  // canUseTool callback does not, and the SDK runs Claude Code in options.cwd.
  const agentCwd = resolvePath(caller.cwd ?? process.cwd());

  const noteAllowed = (toolName: string, toolUseId: string, input: unknown): void => {
    if (toolName === RUN_TOOL) runs.allowed(toolUseId, input);
  };

  // Permission updates a caller returns with an allow: persisting ones would
  // make Claude Code write settings files outside any tool call.
  const keepUpdates = (updates: PermissionUpdate[] | undefined, where: string): PermissionUpdate[] | undefined => {
    if (updates === undefined) return undefined;
    const { kept, dropped } = keptPermissionUpdates(updates, trust);
    if (dropped.length > 0) logger.warn?.(`gatekeeper: dropped permission updates from ${where}`, { dropped });
    return kept;
  };

  const gate: HookCallback = async (input, toolUseID) => {
    if (input.hook_event_name !== 'PreToolUse') return {};
    const id = input.tool_use_id || toolUseID || '';
    const d = await sq.decide('PreToolUse', input.tool_name, input.tool_input, id, sources.of(input.tool_name, input.mcp_server), input.cwd || agentCwd, input);
    if (d.decision === 'allow') {
      noteAllowed(input.tool_name, id, input.tool_input);
      // No opinion: the SDK's permission flow goes on, so the caller's
      // canUseTool (and ours, asking again) still get their say.
      return {};
    }
    return preToolUse(d.decision, forModel(d));
  };

  // The caller's PreToolUse hooks keep their matchers. What they return is
  // combined by the SDK, where a deny beats an ask beats an allow; the one
  // thing a hook could use to get past gatekeeper, an updatedInput, is
  // decided again here.
  const wrapPreToolUse = (h: HookCallback): HookCallback => async (input, toolUseID, opts) => {
    const out = await h(jsonCopy(input), toolUseID, opts);
    if (input.hook_event_name !== 'PreToolUse') return out;
    const hso = (out as { hookSpecificOutput?: Partial<PreToolUseHookSpecificOutput> }).hookSpecificOutput;
    if (hso?.hookEventName !== 'PreToolUse' || hso.updatedInput === undefined) return out;
    // What is decided is what Claude Code gets: a copy the caller no longer holds.
    const updatedInput = jsonCopy(hso.updatedInput);
    const id = input.tool_use_id || toolUseID || '';
    const d = await sq.decide('PreToolUse', input.tool_name, updatedInput, id, sources.of(input.tool_name, input.mcp_server), input.cwd || agentCwd, input);
    if (d.decision === 'allow') {
      noteAllowed(input.tool_name, id, updatedInput);
      return { ...out, hookSpecificOutput: { ...hso, hookEventName: 'PreToolUse', updatedInput } } as HookJSONOutput;
    }
    if (hso.permissionDecision === 'deny') return out;
    return { ...out, hookSpecificOutput: { ...hso, hookEventName: 'PreToolUse', updatedInput, permissionDecision: d.decision, permissionDecisionReason: forModel(d) } } as HookJSONOutput;
  };

  // The caller's PermissionRequest hooks answer the permission prompt that
  // canUseTool answers too: Claude Code asks both at once and takes the
  // first answer (measured: a canUseTool slower than the hook loses). An
  // allow with an updatedInput runs the tool on that input, after
  // gatekeeper decided on the old one, so the new input is decided again
  // (event canUseTool: the same stage), and a deny replaces the allow. An
  // ask is an allow here: the hook is answering the prompt, as a human
  // would. Persisting permission updates are dropped (keepUpdates). The
  // caller's hook gets a copy of the input, so that an input it rewrote in
  // place and returned is seen to differ from the one gatekeeper decided.
  const wrapPermissionRequest = (h: HookCallback): HookCallback => async (input, toolUseID, opts) => {
    const out = await h(jsonCopy(input), toolUseID, opts);
    if (input.hook_event_name !== 'PermissionRequest') return out;
    const hso = (out as { hookSpecificOutput?: Partial<PermissionRequestHookSpecificOutput> }).hookSpecificOutput;
    if (hso?.hookEventName !== 'PermissionRequest' || hso.decision?.behavior !== 'allow') return out;
    const decision = { ...hso.decision };
    const updatedPermissions = keepUpdates(decision.updatedPermissions, 'a PermissionRequest hook');
    if (updatedPermissions !== undefined) decision.updatedPermissions = updatedPermissions;
    if (decision.updatedInput !== undefined) decision.updatedInput = jsonCopy(decision.updatedInput);
    if (decision.updatedInput !== undefined && !sameJson(decision.updatedInput, input.tool_input)) {
      const id = toolUseID ?? '';
      const d = await sq.decide('canUseTool', input.tool_name, decision.updatedInput, id, sources.of(input.tool_name, input.mcp_server), input.cwd || agentCwd, input);
      if (d.decision === 'deny') {
        return { ...out, hookSpecificOutput: { hookEventName: 'PermissionRequest', decision: { behavior: 'deny', message: forModel(d) } } };
      }
      noteAllowed(input.tool_name, id, decision.updatedInput);
    }
    return { ...out, hookSpecificOutput: { hookEventName: 'PermissionRequest', decision } };
  };

  const callerCanUseTool = caller.canUseTool;
  const canUseTool: CanUseTool = async (toolName, input, opts): Promise<PermissionResult | null> => {
    const id = opts.toolUseID ?? '';
    const mcp = sources.of(toolName, opts.mcpServer);
    const d = await sq.decide('canUseTool', toolName, input, id, mcp, agentCwd);
    if (d.decision === 'deny') return { behavior: 'deny', message: forModel(d) };
    if (callerCanUseTool === undefined) {
      if (d.decision === 'allow') {
        noteAllowed(toolName, id, input);
        return { behavior: 'allow', updatedInput: input };
      }
      return { behavior: 'deny', message: `${forModel(d)}; no canUseTool handler is configured to ask a human, so the call is denied` };
    }
    // allow: the caller may still deny; ask: the caller is the human. It
    // gets a copy, so that an input it rewrote in place and returned is seen
    // to differ from the one gatekeeper decided.
    const r = await callerCanUseTool(toolName, jsonCopy(input), opts);
    // null says the answer went out another way, which gatekeeper cannot see
    // (it could carry any input): deny instead of leaving the call waiting.
    if (r === null) return { behavior: 'deny', message: forModel(outOfBand(toolName)) };
    if (r.behavior !== 'allow') return r;
    const updatedPermissions = keepUpdates(r.updatedPermissions, 'canUseTool');
    // What is decided is what Claude Code gets: a copy the caller no longer holds.
    const updatedInput = r.updatedInput === undefined ? undefined : jsonCopy(r.updatedInput);
    const allowed: PermissionResult = { ...r, ...(updatedPermissions === undefined ? {} : { updatedPermissions }), ...(updatedInput === undefined ? {} : { updatedInput }) };
    if (updatedInput !== undefined && !sameJson(updatedInput, input)) {
      const d2 = await sq.decide('canUseTool', toolName, updatedInput, id, mcp, agentCwd);
      if (d2.decision === 'deny') return { behavior: 'deny', message: forModel(d2) };
      noteAllowed(toolName, id, updatedInput);
      return allowed;
    }
    noteAllowed(toolName, id, input);
    return allowed;
  };

  const wrapAll = (ms: HookCallbackMatcher[] | undefined, wrap: (h: HookCallback) => HookCallback): HookCallbackMatcher[] =>
    (ms ?? []).map((m) => ({ ...m, hooks: m.hooks.map(wrap) }));
  const hooks: Partial<Record<HookEvent, HookCallbackMatcher[]>> = { ...(caller.hooks ?? {}) };
  hooks.PreToolUse = [
    {
      hooks: [gate],
      timeout: Math.ceil(decisionTimeoutMs / 1000) + HOOK_TIMEOUT_SLACK_S,
      onFailure: 'block',
    },
    ...wrapAll(caller.hooks?.PreToolUse, wrapPreToolUse),
  ];
  if (caller.hooks?.PermissionRequest !== undefined) hooks.PermissionRequest = wrapAll(caller.hooks.PermissionRequest, wrapPermissionRequest);
  if (onSessionEnd) {
    // Claude Code runs no SessionEnd hook of an SDK host, but the SDK closes
    // its in-process MCP servers when the query ends: that is the signal.
    const inner = server.instance.server;
    const prev = inner.onclose;
    inner.onclose = () => {
      prev?.();
      onSessionEnd();
    };
  }

  const disallowed = [...(caller.disallowedTools ?? [])];
  if (!bashAllowed(first.effectivePolicy) && !disallowed.includes('Bash')) disallowed.push('Bash');

  const options: Options = {
    ...caller,
    ...isolation(caller, trust),
    permissionMode: caller.permissionMode ?? 'default',
    hooks,
    canUseTool,
    mcpServers: { ...(caller.mcpServers ?? {}), [SANDBOX_SERVER]: server },
    disallowedTools: disallowed,
  };
  return {
    options,
    withOurServer: (servers) => {
      checkServerNames(servers);
      sources.set({ ...servers, [SANDBOX_SERVER]: { type: 'sdk' } });
      return { ...servers, [SANDBOX_SERVER]: server };
    },
  };
}

function preToolUse(decision: 'deny' | 'ask', reason: string): HookJSONOutput {
  return { hookSpecificOutput: { hookEventName: 'PreToolUse', permissionDecision: decision, permissionDecisionReason: reason } };
}

/**
 * jsonCopy is a copy of a JSON value as Claude Code will read it (the SDK
 * sends it as JSON), which no caller holds a reference to.
 */
export function jsonCopy<T>(v: T): T {
  return JSON.parse(JSON.stringify(v)) as T;
}

/** sameJson compares two JSON values, ignoring key order. */
export function sameJson(a: unknown, b: unknown): boolean {
  return stableJson(a) === stableJson(b);
}
