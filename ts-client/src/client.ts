// connect(): one connection to the sidecar shared by many SDK queries, for
// agents that call the SDK's query() themselves.

import type { Options } from '@anthropic-ai/claude-agent-sdk';
import { resolveConfig, type GatekeeperOptions } from './config.js';
import { Connection, unavailableAtOpen } from './connection.js';
import { buildOptions, checkCallerOptions, type GatekeeperOwnOptions } from './options.js';
import { SidecarQuery } from './session.js';

/** The options of GatekeeperClient.options(): SDK options plus a sandbox policy override. */
export interface GatekeeperClientQueryOptions extends Options, GatekeeperOwnOptions {}

/**
 * GatekeeperClient holds one connection to the sidecar (reconnecting with
 * backoff while it has open queries).
 */
export interface GatekeeperClient {
  /**
   * options opens one query on the sidecar (with `extra.sandboxPolicy` as
   * its override) and returns SDK options bound to it, to spread into the
   * SDK's own query(): `query({prompt, options: await gk.options({cwd})})`.
   * The caller's hooks, canUseTool, mcpServers and disallowedTools in
   * `extra` are kept and composed with gatekeeper's.
   *
   * Call it once per SDK query(): the sidecar query it opens is closed when
   * that SDK query ends (the SDK then closes its in-process MCP servers,
   * gatekeeper's among them) or by close(); decisions after that deny. It
   * rejects with a GatekeeperError when the sidecar refuses the override,
   * before anything reaches the model, and with a GatekeeperUnavailableError
   * when the sidecar cannot be asked (a token it refuses, nothing at the
   * address); a connection lost later denies every tool call, with the
   * reason, until the client reconnects. It throws GatekeeperConfigError for options that would
   * take tool calls out of gatekeeper's hands or bring agent configuration
   * in (see query()); those that point where the model may write are
   * checked again against the policy's workspace_root once the sidecar
   * has answered.
   */
  options(extra?: GatekeeperClientQueryOptions): Promise<Options>;
  /** close closes every query this client opened and its connection. */
  close(): Promise<void>;
}

/** The least time the first open waits for the sidecar. */
const FIRST_OPEN_MIN_MS = 2000;

/**
 * connect makes a GatekeeperClient. It connects lazily, on the first
 * options() call. Options default from env as for query().
 */
export function connect(opts: GatekeeperOptions = {}): GatekeeperClient {
  const cfg = resolveConfig(opts);
  const conn = new Connection(cfg);
  const open = new Set<SidecarQuery>();
  let closed = false;
  return {
    async options(extra: GatekeeperClientQueryOptions = {}): Promise<Options> {
      if (closed) throw new Error('gatekeeper: the client is closed');
      const { sandboxPolicy, trustAgentConfiguration, onSandboxRun, ...caller } = extra;
      const trust = trustAgentConfiguration === true;
      checkCallerOptions(caller, trust);
      const sq = new SidecarQuery(conn, sandboxPolicy as Record<string, unknown> | undefined);
      open.add(sq);
      const end = (): void => {
        open.delete(sq);
        void sq.close();
      };
      let first;
      try {
        first = await sq.firstOpen(Math.max(cfg.decisionTimeoutMs, FIRST_OPEN_MIN_MS));
      } catch (err) {
        end();
        throw err;
      }
      if (first.unavailable !== undefined) {
        end();
        throw unavailableAtOpen(cfg, first.unavailable, conn.failure);
      }
      try {
        return buildOptions({ sq, caller, first, logger: cfg.logger, decisionTimeoutMs: cfg.decisionTimeoutMs, trust, onSessionEnd: end, onSandboxRun }).options;
      } catch (err) {
        end();
        throw err;
      }
    },
    async close(): Promise<void> {
      closed = true;
      const all = [...open];
      open.clear();
      await Promise.all(all.map((q) => q.close()));
      conn.close();
    },
  };
}
