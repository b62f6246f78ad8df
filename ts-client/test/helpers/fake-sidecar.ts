// A tiny in-test sidecar speaking the wire protocol over a Unix socket, with
// scriptable answers, for unit tests of the client's failure handling.

import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { WebSocketServer, type WebSocket } from 'ws';

/** A frame the fake received. */
export type Frame = Record<string, unknown> & { type: string; id: string };

/** What a handler returns: a reply object (id added), raw text, or null for no reply. */
export type Answer = Record<string, unknown> | string | null;

export interface FakeSidecarOptions {
  token?: string;
  effectivePolicy?: Record<string, unknown>;
  /** Answers open_query; default query_opened. */
  onOpen?: (f: Frame, n: number) => Answer | undefined;
  /** Answers decide; default allow. */
  onDecide?: (f: Frame) => Answer | Promise<Answer>;
  /** Answers run; default a run_result echoing the code. */
  onRun?: (f: Frame, send: (reply: Record<string, unknown>) => void) => void;
}

export interface FakeSidecar {
  url: string;
  socketPath: string;
  token: string;
  frames: Frame[];
  /** Upgrade request headers, one per connection. */
  upgrades: IncomingHttpHeaders[];
  /** Query ids handed out, in order. */
  queryIds: string[];
  /** Drops every connection (the server keeps listening). */
  dropConnections(): void;
  /** Sends a frame of the sidecar's own (tool_call, tool_cancel) on every connection. */
  push(frame: Record<string, unknown>): void;
  close(): Promise<void>;
}

export const DEFAULT_POLICY = {
  version: 1,
  workspace_root: '/tmp/ws',
  tools: { allow: ['Read', 'mcp__sandboxed_code__run'], ask: [], deny: ['Bash'] },
  sandbox: { proc: { timeout: 10000 } },
};

export async function startFakeSidecar(opts: FakeSidecarOptions = {}): Promise<FakeSidecar> {
  const dir = mkdtempSync(join(tmpdir(), 'gk-fake-sidecar-'));
  const socketPath = join(dir, 'gk.sock');
  const token = opts.token ?? 'fake-token';
  const frames: Frame[] = [];
  const upgrades: IncomingHttpHeaders[] = [];
  const queryIds: string[] = [];
  const sockets = new Set<WebSocket>();
  let opens = 0;

  const http: Server = createServer((req, res) => {
    if (req.url === '/healthz') {
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end('{"status":"ok"}');
      return;
    }
    res.writeHead(404);
    res.end();
  });
  const wss = new WebSocketServer({
    server: http,
    path: '/v1/ws',
    verifyClient: (info, cb) => {
      if (info.req.headers.authorization !== `Bearer ${token}`) cb(false, 401);
      else cb(true);
    },
  });
  wss.on('connection', (ws, req) => {
    upgrades.push(req.headers);
    sockets.add(ws);
    ws.on('close', () => sockets.delete(ws));
    ws.on('message', (data) => {
      const f = JSON.parse(String(data)) as Frame;
      frames.push(f);
      const reply = (a: Answer): void => {
        if (a === null || ws.readyState !== ws.OPEN) return;
        ws.send(typeof a === 'string' ? a : JSON.stringify({ id: f.id, ...a }));
      };
      switch (f.type) {
        case 'hello':
          reply({ type: 'welcome', v: 1, server: 'fake-sidecar/0', policy_revision: 'sha256:fake' });
          break;
        case 'open_query': {
          const n = ++opens;
          const custom = opts.onOpen?.(f, n);
          if (custom !== undefined) {
            reply(custom);
            break;
          }
          const id = `q_fake_${String(n)}`;
          queryIds.push(id);
          reply({ type: 'query_opened', query_id: id, policy_hash: 'sha256:p', effective_policy: opts.effectivePolicy ?? DEFAULT_POLICY });
          break;
        }
        case 'decide':
          void Promise.resolve(opts.onDecide ? opts.onDecide(f) : { type: 'decision', decision: 'allow', reason: 'fake allows', rule: 'fake.allow' }).then(
            (a) => reply(a === null || typeof a === 'string' ? a : { tool_use_id: f.tool_use_id, decision_id: 'd_1', policy_revision: 'sha256:fake', ...a }),
          );
          break;
        case 'run':
          if (opts.onRun) opts.onRun(f, (r) => reply(r));
          else {
            reply({ type: 'output', run_id: 'r_1', stream: 'stdout', data: 'ran\n' });
            reply({
              type: 'run_result',
              run_id: 'r_1',
              exit_code: 0,
              reason: 'exited',
              stdout: `ran ${String(f.language)}\n`,
              stderr: '',
              truncated: false,
              timed_out: false,
              oom_killed: false,
              duration_ms: 5,
            });
          }
          break;
        case 'close_query':
          reply({ type: 'query_closed', query_id: f.query_id });
          break;
        case 'tool_result':
          break; // the answer to a pushed tool_call: recorded in frames, never replied to
        default:
          reply({ type: 'error', code: 'unknown_type', message: `unknown type ${f.type}` });
      }
    });
  });
  await new Promise<void>((resolve) => http.listen(socketPath, resolve));
  return {
    url: `unix://${socketPath}`,
    socketPath,
    token,
    frames,
    upgrades,
    queryIds,
    dropConnections: () => {
      for (const s of sockets) s.terminate();
    },
    push: (frame) => {
      for (const s of sockets) s.send(JSON.stringify(frame));
    },
    close: async () => {
      for (const s of sockets) s.terminate();
      await new Promise<void>((resolve) => wss.close(() => resolve()));
      await new Promise<void>((resolve) => http.close(() => resolve()));
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
