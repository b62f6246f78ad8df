// query(): the Agent SDK's query() with every tool call decided by
// gatekeeper, started lazily so that the sidecar has opened (and accepted)
// the query before anything reaches the model.

import { query as sdkQuery, type McpServerConfig, type Options, type PermissionMode, type Query } from '@anthropic-ai/claude-agent-sdk';
import { GatekeeperConfigError, resolveConfig, type GatekeeperOptions } from './config.js';
import { Connection, unavailableAtOpen } from './connection.js';
import { askingShell, checkSettings } from './agent-config.js';
import { buildOptions, checkCallerOptions, type Built, type GatekeeperOwnOptions } from './options.js';
import { SidecarQuery } from './session.js';
import { SdkTools } from './sdk-tools.js';
import { canUseToolApprover } from './approvals.js';

/** GatekeeperQueryOptions are the SDK's Options plus gatekeeper's own. */
export interface GatekeeperQueryOptions extends Options, GatekeeperOwnOptions {
  /**
   * How to reach the sidecar. Each field defaults from env
   * (`GATEKEEPER_URL`, `GATEKEEPER_TOKEN`, `GATEKEEPER_TOKEN_FILE`).
   */
  gatekeeper?: GatekeeperOptions;
}

/** The SDK's query() parameters with gatekeeper's options. */
export interface GatekeeperQueryParams {
  /** The prompt, exactly as the SDK's query() takes it. */
  prompt: Parameters<typeof sdkQuery>[0]['prompt'];
  /** The SDK's options, plus `sandboxPolicy` and `gatekeeper`. */
  options?: GatekeeperQueryOptions;
}

/** The least time the first open waits for the sidecar. */
const FIRST_OPEN_MIN_MS = 2000;

/** Query methods forwarded to the SDK's Query; the type check below keeps the list whole. */
const FORWARDED = [
  'interrupt',
  'setMcpPermissionModeOverride',
  'setModel',
  'setMaxThinkingTokens',
  'initializationResult',
  'reinitialize',
  'supportedCommands',
  'supportedModels',
  'supportedAgents',
  'mcpServerStatus',
  'getContextUsage',
  'usage_EXPERIMENTAL_MAY_CHANGE_DO_NOT_RELY_ON_THIS_API_YET',
  'readFile',
  'reloadSkills',
  'reloadOutputStyles',
  'accountInfo',
  'rewindFiles',
  'seedReadState',
  'reconnectMcpServer',
  'toggleMcpServer',
  'readMcpResource',
  'streamInput',
  'stopTask',
  'backgroundTasks',
] as const satisfies readonly (keyof Query)[];

/** Methods gatekeeper implements itself. */
type Guarded = 'next' | 'return' | 'throw' | 'close' | 'setPermissionMode' | 'setMcpServers' | 'applyFlagSettings' | 'updateSettings' | 'reloadPlugins';
/** A Query method that is neither forwarded nor guarded breaks the build here. */
type Unhandled = Exclude<keyof Query, (typeof FORWARDED)[number] | Guarded | typeof Symbol.asyncIterator | typeof Symbol.asyncDispose>;
const everyMethodHandled: [Unhandled] extends [never] ? true : Unhandled = true;
void everyMethodHandled;

/**
 * query runs the Agent SDK's query() with gatekeeper deciding every tool
 * call. It takes what the SDK's query() takes, plus `options.sandboxPolicy`
 * (this query's sandbox policy override), `options.onSandboxRun` (every
 * finished sandboxed run, with the files it returned) and
 * `options.gatekeeper` (how to reach the sidecar), and returns a Query that streams the SDK's messages
 * and forwards its control methods.
 *
 * Nothing starts when query() returns: the first `next()` (or control
 * method) connects to the sidecar and opens the query there, and only then
 * starts the SDK. An override the sidecar rejects makes that first step
 * throw a GatekeeperError listing the violations, and nothing reaches the
 * model. A sidecar that cannot be asked then (it refuses the token with
 * HTTP 401, nothing listens at the address, no answer within
 * max(decisionTimeoutMs, 2 s), a token file that cannot be read) makes it
 * throw a GatekeeperUnavailableError naming the address and what to check,
 * again before anything reaches the model. A connection lost after that
 * fails closed instead: every tool call is denied with the reason (rule
 * `client.gatekeeper_unavailable`) until the client has reconnected and
 * opened the query again. The sidecar
 * query is closed when the iteration ends, throws, is returned from, or the
 * query is closed or aborted.
 *
 * Claude Code loads no agent configuration from files: settingSources
 * defaults to [] and strictMcpConfig to true. It throws
 * GatekeeperConfigError at once for options that would take tool calls out
 * of gatekeeper's hands (permissionMode 'bypassPermissions',
 * allowDangerouslySkipPermissions, permissionPromptToolName, settings with
 * disableAllHooks, an MCP server of the caller named `sandboxed_code`) and,
 * unless `trustAgentConfiguration` is set, for options that bring agent
 * configuration in (see agent-config.ts and SECURITY.md). An option that
 * points where the model may write is checked again against the policy's
 * workspace_root when the sidecar has opened the query: such a refusal is
 * the first step's error, before Claude Code starts.
 */
export function query(params: GatekeeperQueryParams): Query {
  const { sandboxPolicy, gatekeeper, trustAgentConfiguration, onSandboxRun, ...sdkOptions } = params.options ?? {};
  const trust = trustAgentConfiguration === true;
  checkCallerOptions(sdkOptions, trust);
  const cfg = resolveConfig(gatekeeper);
  const conn = new Connection(cfg);
  const signal = sdkOptions.abortController?.signal;

  let sq: SidecarQuery | undefined;
  let inner: Query | undefined;
  let built: Built | undefined;
  let starting: Promise<Query> | undefined;
  let finished = false;
  let finishing: Promise<void> | undefined;

  const finish = (): Promise<void> =>
    (finishing ??= (async () => {
      finished = true;
      signal?.removeEventListener('abort', onAbort);
      try {
        await sq?.close();
      } finally {
        conn.close();
      }
    })());
  const onAbort = (): void => void finish();
  signal?.addEventListener('abort', onAbort, { once: true });

  const start = (): Promise<Query> =>
    (starting ??= (async () => {
      if (finished) throw new Error('gatekeeper: the query was closed before it started');
      if (signal?.aborted) throw new Error('gatekeeper: the query was aborted before it started');
      // The caller's in-process servers, declared so that sandboxed code
      // may call their tools where the policy lets it (each call decided
      // by the gate, and run here with the tool's own handler).
      const tools = await SdkTools.declare(sdkOptions.mcpServers, cfg.logger);
      // The caller's canUseTool also answers the policy's asks on calls
      // that sandboxed code makes; without one, the sidecar denies them.
      const approver = sdkOptions.canUseTool === undefined ? undefined : canUseToolApprover(sdkOptions.canUseTool);
      const s = new SidecarQuery(conn, sandboxPolicy as Record<string, unknown> | undefined, tools, approver);
      sq = s;
      const first = await s.firstOpen(Math.max(cfg.decisionTimeoutMs, FIRST_OPEN_MIN_MS));
      if (first.unavailable !== undefined) throw unavailableAtOpen(cfg, first.unavailable, conn.failure);
      if (finished || signal?.aborted) throw new Error('gatekeeper: the query was closed before it started');
      built = buildOptions({ sq: s, caller: sdkOptions, first, logger: cfg.logger, decisionTimeoutMs: cfg.decisionTimeoutMs, trust, onSandboxRun });
      inner = sdkQuery({ prompt: params.prompt, options: built.options });
      return inner;
    })());

  const started = async (): Promise<Query> => {
    try {
      return await start();
    } catch (err) {
      await finish();
      throw err;
    }
  };

  const own = {
    async next(...args: [] | [unknown]): Promise<IteratorResult<Awaited<ReturnType<Query['next']>>['value'], void>> {
      const q = await started();
      try {
        const r = await q.next(...args);
        if (r.done === true) await finish();
        return r;
      } catch (err) {
        await finish();
        throw err;
      }
    },
    async return(value: void): Promise<IteratorResult<never, void>> {
      try {
        if (starting === undefined) return { done: true, value };
        const q = await starting.catch(() => undefined);
        return q ? ((await q.return(value)) as IteratorResult<never, void>) : { done: true, value };
      } finally {
        await finish();
      }
    },
    async throw(e: unknown): Promise<IteratorResult<never, void>> {
      try {
        if (starting === undefined) throw e;
        const q = await starting.catch(() => undefined);
        if (q === undefined) throw e;
        return (await q.throw(e)) as IteratorResult<never, void>;
      } finally {
        await finish();
      }
    },
    close(): void {
      inner?.close();
      void finish();
    },
    async setPermissionMode(mode: PermissionMode): Promise<void> {
      if (mode === 'bypassPermissions') throw new GatekeeperConfigError("gatekeeper refuses permissionMode 'bypassPermissions'");
      return (await started()).setPermissionMode(mode);
    },
    async setMcpServers(servers: Record<string, McpServerConfig>): ReturnType<Query['setMcpServers']> {
      const q = await started();
      if (built === undefined) throw new Error('gatekeeper: the query has not started');
      return q.setMcpServers(built.withOurServer(servers));
    },
    async applyFlagSettings(settings: Parameters<Query['applyFlagSettings']>[0]): Promise<void> {
      checkSettings(settings as Record<string, unknown>, 'applyFlagSettings', trust);
      // A permissions object replaces the flag layer's whole one: keep the shell ask rules in it.
      const applied = settings.permissions === undefined ? settings : { ...settings, permissions: askingShell(settings.permissions ?? undefined) };
      return (await started()).applyFlagSettings(applied);
    },
    async updateSettings(source: Parameters<Query['updateSettings']>[0], settings: Record<string, unknown>): Promise<void> {
      if (!trust) {
        throw new GatekeeperConfigError(
          `gatekeeper refuses updateSettings: it writes a settings file (${source}) outside any tool call; set trustAgentConfiguration: true to accept what that costs (SECURITY.md, "Agent configuration boundary (client)")`,
        );
      }
      checkSettings(settings, 'updateSettings', trust);
      return (await started()).updateSettings(source, settings);
    },
    async reloadPlugins(opts?: Parameters<Query['reloadPlugins']>[0]): ReturnType<Query['reloadPlugins']> {
      if (!trust && opts?.addPlugins !== undefined && opts.addPlugins.length > 0) {
        throw new GatekeeperConfigError(
          'gatekeeper refuses reloadPlugins({addPlugins}): a plugin brings hooks that run commands on the host, MCP servers, skills and agents; set trustAgentConfiguration: true to accept what that costs (SECURITY.md, "Agent configuration boundary (client)")',
        );
      }
      return (await started()).reloadPlugins(opts);
    },
    [Symbol.asyncIterator](): Query {
      return proxy;
    },
    async [Symbol.asyncDispose](): Promise<void> {
      await own.return(undefined);
    },
  };

  const forwarded = new Set<string>(FORWARDED);
  const proxy = new Proxy(own, {
    get(target, prop, receiver): unknown {
      if (typeof prop === 'string' && forwarded.has(prop)) {
        return async (...args: unknown[]): Promise<unknown> => {
          const q = (await started()) as unknown as Record<string, (...a: unknown[]) => Promise<unknown>>;
          const m = q[prop];
          if (typeof m !== 'function') throw new TypeError(`Query.${prop} is not available in this SDK version`);
          return m.apply(q, args);
        };
      }
      return Reflect.get(target, prop, receiver) as unknown;
    },
  }) as unknown as Query;
  return proxy;
}
