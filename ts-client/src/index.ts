// @gatekeeper/client: the Agent SDK's query() with every tool call decided
// by the gatekeeper sidecar. See README.md.

export { query } from './query.js';
export type { GatekeeperQueryOptions, GatekeeperQueryParams } from './query.js';
export { connect } from './client.js';
export type { GatekeeperClient, GatekeeperClientQueryOptions } from './client.js';
export { GatekeeperError } from './protocol.js';
export { GatekeeperConfigError } from './config.js';
export { GatekeeperUnavailableError } from './connection.js';
export type { SandboxPolicy, GatekeeperOwnOptions } from './options.js';
export type { SandboxRun, SandboxFile, SandboxRunReport, SandboxReportFile } from './sandboxed-code.js';
export type { RunSessionReply, StateLostReply, SessionEndReason } from './protocol.js';
export type { NestedCall } from './approvals.js';
export type { GatekeeperOptions, GatekeeperLogger, GatekeeperSocket, SocketHandlers, CreateSocket } from './config.js';
