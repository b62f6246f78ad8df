// gatekeeper-tools: call the MCP tools this run may call, through gatekeeper.
// Each server is a module of this package (require('gatekeeper-tools/<server>'))
// with one async function per tool; its types and docs are in <server>.d.ts.

/** One item of a tool's MCP result content. */
export interface ContentItem {
  type: string;
  text?: string;
  [key: string]: unknown;
}

/**
 * An image, audio or embedded resource of a result, written to a new file
 * under /tmp/gatekeeper-results: no base64 reaches the program.
 */
export interface FileItem {
  type: 'file';
  /** The MCP content type it came as. */
  kind: 'image' | 'audio' | 'resource';
  /** Where it was written. */
  path: string;
  /** Its MIME type, as the server gave it. */
  mimeType: string;
  /** Its size in bytes. */
  size: number;
  /** The embedded resource's URI (kind 'resource'). */
  uri?: string;
}

/**
 * A link to a resource, as the server gave it; gatekeeper never fetches it
 * (call a tool that reads it, if the policy lets the program).
 */
export interface ResourceLinkItem {
  type: 'resource_link';
  uri: string;
  name: string;
  mimeType?: string;
  description?: string;
  size?: number;
  [key: string]: unknown;
}

/**
 * What a tool without an output schema resolves to: its text when its
 * content is all text, else its content items in order, text as a string.
 */
export type ToolContent = string | Array<string | FileItem | ResourceLinkItem | ContentItem>;

/** A tool's whole MCP result, as call() resolves to it. */
export interface CallToolResult {
  content: Array<ContentItem | FileItem | ResourceLinkItem>;
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
