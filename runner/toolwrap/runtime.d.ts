// gatekeeper-tools: call the MCP tools this run may call, through gatekeeper.
// Each server is a module of this package (require('gatekeeper-tools/<server>'))
// with one async function per tool; its types and docs are in <server>.d.ts.

/** One item of a tool's MCP result content. */
export interface ContentItem {
  type: string;
  text?: string;
  [key: string]: unknown;
}

/** A tool's whole MCP result, as call() resolves to it. */
export interface CallToolResult {
  content: ContentItem[];
  structuredContent?: unknown;
  isError?: boolean;
  [key: string]: unknown;
}

/** A server this program may call, as servers() describes it. */
export interface ServerInfo {
  /** The module to require: gatekeeper-tools/<module>. */
  module: string;
  /** What the server is for. */
  description: string;
  /** Each MCP tool name → its function in the module. */
  tools: { [tool: string]: string };
}

/**
 * Why a call got no result. From gatekeeper: "denied" (the policy refused
 * it), "limit" (a bound on this run's calls was hit), "timeout", "server"
 * (the MCP server failed or is down), "cancelled" (the run is ending),
 * "bad_request". From this module: "tool_error" (the tool ran and reported
 * an error; result holds its MCP result) and "bridge" (gatekeeper's bridge
 * is not there or went away: this run may call no tools).
 */
export type ToolCallErrorKind =
  | 'denied'
  | 'limit'
  | 'timeout'
  | 'server'
  | 'cancelled'
  | 'bad_request'
  | 'tool_error'
  | 'bridge';

/** A tool call that got no result, or a tool that reported an error. */
export declare class ToolCallError extends Error {
  /** Why: see ToolCallErrorKind. */
  readonly kind: ToolCallErrorKind | string;
  /** The policy rule or bound that refused the call, or "". */
  readonly rule: string;
  /** The tool's MCP result, for kind "tool_error". */
  readonly result?: CallToolResult;
}
/** The policy refused the call; rule names the rule. */
export declare class ToolCallDenied extends ToolCallError {}
/** A bound on this run's calls was hit; rule names the bound. */
export declare class ToolCallLimit extends ToolCallError {}
/** The call took longer than the policy allows. */
export declare class ToolCallTimeout extends ToolCallError {}
/** The MCP server failed, or is down. */
export declare class ToolServerError extends ToolCallError {}
/** The run is ending; the call's answer will not come. */
export declare class ToolCallCancelled extends ToolCallError {}
/** gatekeeper could not read the request. */
export declare class ToolCallBadRequest extends ToolCallError {}

/**
 * Calls tool of server with args and resolves to its whole MCP result;
 * rejects with a ToolCallError when the call gets no result, and with kind
 * "tool_error" when the tool reports an error (isError).
 */
export declare function call(server: string, tool: string, args?: { [key: string]: unknown }): Promise<CallToolResult>;

/** The servers this program may call, by name. */
export declare function servers(): { [server: string]: ServerInfo };
