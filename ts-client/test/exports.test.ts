// Pins the public surface: what the package exports, at run time (from the
// built dist/, through the package's own exports map) and as types.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import * as client from '@gatekeeper/client';
import * as testing from '@gatekeeper/client/testing';
import type {
  CreateSocket,
  GatekeeperClient,
  GatekeeperClientQueryOptions,
  GatekeeperLogger,
  GatekeeperOptions,
  GatekeeperOwnOptions,
  GatekeeperQueryOptions,
  GatekeeperQueryParams,
  GatekeeperSocket,
  NestedCall,
  RunSessionReply,
  SandboxFile,
  SandboxPolicy,
  SandboxReportFile,
  SandboxRun,
  SandboxRunReport,
  SessionEndReason,
  SocketHandlers,
  StateLostReply,
} from '@gatekeeper/client';
import type {
  FakeModel,
  FakeModelOptions,
  FakeRequest,
  FakeScriptStep,
  FakeToolCall,
  FakeToolResult,
  FakeTurn,
  FakeTurnContext,
} from '@gatekeeper/client/testing';
import type { Query } from '@anthropic-ai/claude-agent-sdk';

test('the package exports exactly query, connect and the three error classes', () => {
  assert.deepEqual(Object.keys(client).sort(), ['GatekeeperConfigError', 'GatekeeperError', 'GatekeeperUnavailableError', 'connect', 'query']);
  assert.equal(typeof client.query, 'function');
  assert.equal(typeof client.connect, 'function');
  assert.ok(new client.GatekeeperError('policy_override_rejected', 'm', ['v']) instanceof Error);
  assert.ok(new client.GatekeeperConfigError('m') instanceof Error);
  const unavailable = new client.GatekeeperUnavailableError('unauthorized', 'unix:///gk.sock', 'HTTP 401', 'm');
  assert.ok(unavailable instanceof Error);
  assert.deepEqual([unavailable.name, unavailable.code, unavailable.url, unavailable.reason], ['GatekeeperUnavailableError', 'unauthorized', 'unix:///gk.sock', 'HTTP 401']);
});

test('the testing subpath exports the fake model', () => {
  assert.deepEqual(Object.keys(testing).sort(), ['lastToolResults', 'startFakeModel']);
});

test('only ., ./testing and ./package.json are importable', async () => {
  const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8')) as { exports: Record<string, unknown> };
  assert.deepEqual(Object.keys(pkg.exports).sort(), ['.', './package.json', './testing']);
  await assert.rejects(import('@gatekeeper/client/dist/session.js' as string), { code: 'ERR_PACKAGE_PATH_NOT_EXPORTED' });
});

test('query has the SDK signature plus gatekeeper options, and returns the SDK Query type', () => {
  const q: (p: GatekeeperQueryParams) => Query = client.query;
  const params: Parameters<typeof client.query>[0] = { prompt: 'x', options: { cwd: '/', sandboxPolicy: { proc: { timeout: '30s' } }, gatekeeper: { url: 'unix:///x.sock' } } };
  assert.equal(typeof q, 'function');
  assert.equal(params.prompt, 'x');
});

// Type-level pins: this file stops compiling when a public type disappears.
type PublicTypes = [
  CreateSocket,
  GatekeeperClient,
  GatekeeperClientQueryOptions,
  GatekeeperLogger,
  GatekeeperOptions,
  GatekeeperOwnOptions,
  GatekeeperQueryOptions,
  GatekeeperQueryParams,
  GatekeeperSocket,
  NestedCall,
  RunSessionReply,
  SandboxFile,
  SandboxPolicy,
  SandboxReportFile,
  SandboxRun,
  SandboxRunReport,
  SessionEndReason,
  SocketHandlers,
  StateLostReply,
  FakeModel,
  FakeModelOptions,
  FakeRequest,
  FakeScriptStep,
  FakeToolCall,
  FakeToolResult,
  FakeTurn,
  FakeTurnContext,
];
const gatekeeperKeys: (keyof GatekeeperOptions)[] = ['url', 'token', 'tokenFile', 'decisionTimeoutMs', 'logger', 'createSocket'];
// Exactly the options gatekeeper adds to the SDK's, both ways: a key added or removed stops this compiling.
const ownKeys: { [K in keyof GatekeeperOwnOptions]-?: true } = { sandboxPolicy: true, onSandboxRun: true, trustAgentConfiguration: true };
void (null as unknown as PublicTypes);
void gatekeeperKeys;

test('gatekeeper adds sandboxPolicy, onSandboxRun and trustAgentConfiguration to the SDK options of query() and connect().options()', () => {
  assert.deepEqual(Object.keys(ownKeys).sort(), ['onSandboxRun', 'sandboxPolicy', 'trustAgentConfiguration']);
  const viaQuery: GatekeeperQueryOptions = { trustAgentConfiguration: true, settingSources: ['project'] };
  const viaConnect: GatekeeperClientQueryOptions = { trustAgentConfiguration: false };
  assert.equal(viaQuery.trustAgentConfiguration, true);
  assert.equal(viaConnect.trustAgentConfiguration, false);
});
