// The caller's in-process MCP servers (createSdkMcpServer with tool()) as
// sandboxed code may call them: declared to the sidecar at open_query
// (sdk_servers), and run here, with the tool's own handler, when the
// sidecar relays a nested call the gate allowed (tool_call → tool_result).

import type { McpServerConfig } from '@anthropic-ai/claude-agent-sdk';
import type { GatekeeperLogger } from './config.js';
import type { SdkServerDecl, SdkToolDecl } from './protocol.js';
import { SANDBOX_SERVER } from './protocol.js';

/**
 * A server name the sidecar accepts in sdk_servers: the policy's MCP
 * server names (they become Python module names in the sandbox). The Go
 * declaration is runner/toolwrap's ValidServerName.
 */
const SERVER_NAME = /^[a-z][a-z0-9_]{0,31}$/;
/** A tool name the sidecar accepts (MCP's tool names). */
const TOOL_NAME = /^[A-Za-z0-9_.-]{1,128}$/;
/** The protocol's bounds on a declaration (gate/wire's MaxSDKServers, MaxSDKTools). */
const MAX_SERVERS = 16;
const MAX_TOOLS = 256;
/**
 * The most bytes of result JSON this client sends in one tool_result: the
 * sidecar's default frame limit (1 MiB) less room for the frame around
 * it. A larger result is answered with an error, so that the connection,
 * which a frame past the limit would close, stays up.
 */
export const MAX_TOOL_RESULT_BYTES = (1 << 20) - (16 << 10);

/** What a tool's MCP handler answers (an MCP CallToolResult). */
export type CallToolResult = Record<string, unknown>;

type RequestHandler = (request: { method: string; params: Record<string, unknown> }, extra: Record<string, unknown>) => Promise<unknown>;

/**
 * handlersOf returns the MCP request handlers of an SDK server's instance
 * (an McpServer of @modelcontextprotocol/sdk, as the Agent SDK's
 * createSdkMcpServer makes it): its `server`'s handlers for tools/list and
 * tools/call, the very code the Agent SDK's own transport reaches, so
 * that a relayed call gets the tool's input validation, handler and error
 * conversion unchanged. The instance is connected to the SDK's transport
 * and cannot take a second one; its handlers are read from the protocol
 * object's request handler map, a field the MCP SDK does not export (a
 * test pins it to the installed version). undefined when the instance
 * has another shape: the server is then not declared, and code cannot
 * call it.
 */
function handlersOf(instance: unknown): { list: RequestHandler; call: RequestHandler } | undefined {
  const server = (instance as { server?: { _requestHandlers?: unknown } } | undefined)?.server;
  const handlers = server?._requestHandlers;
  if (!(handlers instanceof Map)) return undefined;
  const list = handlers.get('tools/list') as RequestHandler | undefined;
  const call = handlers.get('tools/call') as RequestHandler | undefined;
  if (typeof list !== 'function' || typeof call !== 'function') return undefined;
  return { list, call };
}

/** extraFor is the handler's second argument: a request of no MCP session, cancelled by signal. */
function extraFor(signal: AbortSignal, id: string): Record<string, unknown> {
  return {
    signal,
    requestId: id,
    sendNotification: async (): Promise<void> => undefined,
    sendRequest: async (): Promise<never> => {
      throw new Error('a tool called from sandboxed code cannot make requests of the client');
    },
  };
}

/**
 * SdkTools are the caller's in-process servers that code may call, by the
 * name the model knows them by (their key in options.mcpServers).
 */
export class SdkTools {
  /** The sdk_servers of open_query; empty when there are none. */
  readonly declared: SdkServerDecl[];
  private readonly servers: Map<string, { call: RequestHandler; tools: Set<string> }>;

  private constructor(declared: SdkServerDecl[], servers: Map<string, { call: RequestHandler; tools: Set<string> }>) {
    this.declared = declared;
    this.servers = servers;
  }

  /**
   * declare lists the tools of every `type: "sdk"` server of mcpServers
   * (but gatekeeper's own), as their tools/list answers. A server whose
   * name the protocol does not accept, or whose instance has no
   * handlers, is left out with a warning: code cannot call it, and the
   * model still calls its tools directly, through the gate.
   */
  static async declare(mcpServers: Record<string, McpServerConfig> | undefined, logger: GatekeeperLogger): Promise<SdkTools> {
    const declared: SdkServerDecl[] = [];
    const servers = new Map<string, { call: RequestHandler; tools: Set<string> }>();
    for (const [name, cfg] of Object.entries(mcpServers ?? {})) {
      if (cfg.type !== 'sdk' || name === SANDBOX_SERVER) continue;
      const skip = (why: string): void => logger.warn?.('gatekeeper: an in-process MCP server is not callable from sandboxed code', { server: name, why });
      if (declared.length >= MAX_SERVERS) {
        skip(`a query declares at most ${String(MAX_SERVERS)} servers`);
        continue;
      }
      if (!SERVER_NAME.test(name)) {
        skip('its name is not a lower-case name of at most 32 letters, digits and _ starting with a letter');
        continue;
      }
      const h = handlersOf((cfg as { instance?: unknown }).instance);
      if (h === undefined) {
        skip('its instance has no tools/list and tools/call handlers');
        continue;
      }
      let listed: unknown;
      try {
        listed = await h.list({ method: 'tools/list', params: {} }, extraFor(new AbortController().signal, 'gatekeeper-list'));
      } catch (err) {
        skip(`its tools/list failed: ${(err as Error).message}`);
        continue;
      }
      const tools = declTools(listed);
      if (tools === undefined || tools.length > MAX_TOOLS) {
        skip(tools === undefined ? 'its tools/list answer is malformed' : `it has more than ${String(MAX_TOOLS)} tools`);
        continue;
      }
      // What the server is for: its MCP instructions, which the model
      // would read at initialize (the sidecar shows their first line).
      const instructions = (cfg as unknown as { instance?: { server?: { _instructions?: unknown } } }).instance?.server?._instructions;
      declared.push({ name, ...(typeof instructions === 'string' && instructions !== '' ? { description: instructions } : {}), tools });
      servers.set(name, { call: h.call, tools: new Set(tools.map((t) => t.name)) });
    }
    return new SdkTools(declared, servers);
  }

  /**
   * call runs a declared tool with its handler. It resolves with the
   * tool's CallToolResult (a tool that failed: isError true) and rejects
   * for a tool that was not declared, a handler that threw past the MCP
   * server's own conversion, a result that is not an object, or one past
   * MAX_TOOL_RESULT_BYTES.
   */
  async call(server: string, tool: string, args: Record<string, unknown>, signal: AbortSignal, id: string): Promise<CallToolResult> {
    const s = this.servers.get(server);
    if (s === undefined || !s.tools.has(tool)) throw new Error(`this client declared no tool ${JSON.stringify(tool)} of server ${JSON.stringify(server)}`);
    const result = await s.call({ method: 'tools/call', params: { name: tool, arguments: args } }, extraFor(signal, id));
    if (typeof result !== 'object' || result === null || Array.isArray(result)) throw new Error('the tool answered something that is not an MCP CallToolResult');
    const bytes = Buffer.byteLength(JSON.stringify(result), 'utf8');
    if (bytes > MAX_TOOL_RESULT_BYTES) throw new Error(`the tool's result is ${String(bytes)} bytes, more than this client sends in one frame (${String(MAX_TOOL_RESULT_BYTES)})`);
    return result as CallToolResult;
  }
}

/** declTools maps a tools/list answer to the protocol's declaration; undefined when malformed. */
function declTools(listed: unknown): SdkToolDecl[] | undefined {
  const tools = (listed as { tools?: unknown } | undefined)?.tools;
  if (!Array.isArray(tools)) return undefined;
  const out: SdkToolDecl[] = [];
  for (const t of tools as Record<string, unknown>[]) {
    if (typeof t?.name !== 'string' || !TOOL_NAME.test(t.name)) return undefined;
    if (typeof t.inputSchema !== 'object' || t.inputSchema === null || Array.isArray(t.inputSchema)) return undefined;
    const d: SdkToolDecl = { name: t.name };
    if (typeof t.description === 'string' && t.description !== '') d.description = t.description;
    d.inputSchema = t.inputSchema as Record<string, unknown>;
    if (typeof t.outputSchema === 'object' && t.outputSchema !== null && !Array.isArray(t.outputSchema)) d.outputSchema = t.outputSchema as Record<string, unknown>;
    const a = t.annotations as Record<string, unknown> | undefined;
    if (typeof a === 'object' && a !== null) {
      const hints: NonNullable<SdkToolDecl['annotations']> = {};
      for (const k of ['readOnlyHint', 'destructiveHint', 'idempotentHint', 'openWorldHint'] as const) {
        if (typeof a[k] === 'boolean') hints[k] = a[k];
      }
      if (Object.keys(hints).length > 0) d.annotations = hints;
    }
    out.push(d);
  }
  return out;
}
