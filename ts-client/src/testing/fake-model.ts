// A scripted fake of the Anthropic Messages API on loopback, for driving the
// real Agent SDK (and the Claude Code binary under it) in tests and demos
// without a model or a network.

import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomBytes } from 'node:crypto';

/** FakeToolCall is one tool_use block the fake model emits. */
export interface FakeToolCall {
  /** The tool name, e.g. `Read` or `mcp__sandboxed_code__run`. */
  name: string;
  /** The tool input, sent as `input_json_delta` pieces. */
  input: Record<string, unknown>;
  /** The tool_use id; default a fresh `toolu_fake_…`. */
  id?: string;
}

/** FakeTurn is one reply of the model. */
export type FakeTurn =
  | ({ type: 'tool_use' } & FakeToolCall)
  | { type: 'tool_uses'; calls: FakeToolCall[] }
  | { type: 'text'; text: string };

/** FakeToolResult is one tool_result block the SDK sent back. */
export interface FakeToolResult {
  /** The tool_use id it answers. */
  tool_use_id: string;
  /** Its content flattened to text (text blocks joined by newlines). */
  text: string;
  /** Whether the SDK marked it `is_error`. */
  is_error: boolean;
  /** Its content as sent. */
  content: unknown;
}

/** FakeRequest is one HTTP request the fake model received. */
export interface FakeRequest {
  /** The HTTP method, e.g. `POST`. */
  method: string;
  /** The path with its query, e.g. `/v1/messages?beta=true`. */
  path: string;
  /** The request headers, names in lower case. */
  headers: Record<string, string | string[] | undefined>;
  /** The parsed JSON body, the raw text when it is not JSON, or undefined. */
  body: unknown;
  /**
   * `turn`: a streaming Messages request with tools, which a script turn
   * answers. `side`: anything else (count_tokens, a non-streaming or
   * tool-less request such as title generation, a HEAD probe), answered with
   * a minimal valid reply without using the script.
   */
  kind: 'turn' | 'side';
}

/** FakeTurnContext is what a scripted function turn gets. */
export interface FakeTurnContext {
  /** The request being answered. */
  request: FakeRequest;
  /** The tool_result blocks of the request's last user message. */
  toolResults: FakeToolResult[];
  /** The turn's index in the script. */
  index: number;
}

/** FakeScriptStep is a fixed turn, or a function of the request it answers. */
export type FakeScriptStep = FakeTurn | ((ctx: FakeTurnContext) => FakeTurn | Promise<FakeTurn>);

/** FakeModelOptions configure startFakeModel. */
export interface FakeModelOptions {
  /** The turns, in order: each answers one `turn` request. */
  script: FakeScriptStep[];
  /** The text answered once the script is used up. Default: `"(fake model: script exhausted)"`. */
  whenExhausted?: string;
}

/** FakeModel is a running fake; close() it when done. */
export interface FakeModel {
  /** `http://127.0.0.1:PORT`, for ANTHROPIC_BASE_URL. */
  readonly url: string;
  /** The port it listens on. */
  readonly port: number;
  /** Every request received, in order. */
  readonly requests: readonly FakeRequest[];
  /** The `turn` requests, in order (one per script turn used). */
  readonly turns: readonly FakeRequest[];
  /** Failures inside the fake (a throwing script function); empty when all went well. */
  readonly errors: readonly string[];
  /** Every tool_result the SDK sent back, in order, once per tool_use id. */
  toolResults(): FakeToolResult[];
  /** The tool_result for one tool_use id. */
  toolResult(toolUseId: string): FakeToolResult | undefined;
  /**
   * env returns an environment for the SDK's `env` option (which replaces the
   * child's whole environment): PATH, HOME (`home`, default this process's),
   * the fake's base URL and a dummy key, and switches that keep Claude Code
   * off the network (no telemetry, updates or other nonessential traffic).
   */
  env(home?: string, extra?: Record<string, string>): Record<string, string>;
  /** close stops the server. */
  close(): Promise<void>;
}

/**
 * startFakeModel starts a fake Messages API on 127.0.0.1 at a random port.
 * A `turn` request (POST /v1/messages, `stream: true`, with tools) is
 * answered by the next script turn as the real API streams it:
 * `message_start`, per block `content_block_start` / `content_block_delta`
 * (`input_json_delta` or `text_delta`) / `content_block_stop`,
 * `message_delta` with `stop_reason` `tool_use` or `end_turn`, and
 * `message_stop`. Everything else is a side request with a minimal reply.
 */
export async function startFakeModel(opts: FakeModelOptions): Promise<FakeModel> {
  const requests: FakeRequest[] = [];
  const turns: FakeRequest[] = [];
  const errors: string[] = [];
  const prefix = randomBytes(4).toString('hex');
  let nextTool = 0;
  let nextMsg = 0;
  let step = 0;
  const exhausted = opts.whenExhausted ?? '(fake model: script exhausted)';

  const server: Server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      void handle(req, Buffer.concat(chunks).toString('utf8'), res).catch((err: unknown) => {
        errors.push(`handler: ${String(err)}`);
        if (!res.headersSent) res.writeHead(500, { 'content-type': 'application/json' });
        res.end(JSON.stringify({ type: 'error', error: { type: 'api_error', message: String(err) } }));
      });
    });
  });

  async function handle(req: IncomingMessage, raw: string, res: ServerResponse): Promise<void> {
    let body: unknown = raw === '' ? undefined : raw;
    try {
      if (raw !== '') body = JSON.parse(raw);
    } catch {
      // keep the raw text
    }
    const path = req.url ?? '/';
    const b = (typeof body === 'object' && body !== null ? body : {}) as Record<string, unknown>;
    const isMessages = req.method === 'POST' && /^\/v1\/messages(\?|$)/.test(path);
    const isTurn = isMessages && b.stream === true && Array.isArray(b.tools) && b.tools.length > 0;
    const record: FakeRequest = { method: req.method ?? '', path, headers: req.headers, body, kind: isTurn ? 'turn' : 'side' };
    requests.push(record);
    const model = typeof b.model === 'string' ? b.model : 'claude-fake';

    if (req.method === 'POST' && path.startsWith('/v1/messages/count_tokens')) {
      json(res, { input_tokens: 1 });
      return;
    }
    if (!isMessages) {
      if (req.method === 'HEAD') {
        res.writeHead(200);
        res.end();
      } else json(res, {});
      return;
    }
    if (!isTurn) {
      if (b.stream === true) stream(res, model, { type: 'text', text: 'ok' });
      else {
        json(res, {
          id: `msg_fake_${prefix}_${String(nextMsg++)}`,
          type: 'message',
          role: 'assistant',
          model,
          content: [{ type: 'text', text: 'ok' }],
          stop_reason: 'end_turn',
          stop_sequence: null,
          usage: { input_tokens: 1, output_tokens: 1 },
        });
      }
      return;
    }
    turns.push(record);
    const index = step++;
    const s = opts.script[index];
    let turn: FakeTurn;
    if (s === undefined) turn = { type: 'text', text: exhausted };
    else if (typeof s === 'function') {
      try {
        turn = await s({ request: record, toolResults: lastToolResults(body), index });
      } catch (err) {
        errors.push(`script turn ${String(index)}: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}`);
        turn = { type: 'text', text: `(fake model: script turn ${String(index)} failed)` };
      }
    } else turn = s;
    stream(res, model, turn);
  }

  function json(res: ServerResponse, v: unknown): void {
    res.writeHead(200, { 'content-type': 'application/json' });
    res.end(JSON.stringify(v));
  }

  function stream(res: ServerResponse, model: string, turn: FakeTurn): void {
    res.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' });
    const ev = (type: string, data: Record<string, unknown>): void => {
      res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`);
    };
    ev('message_start', {
      message: {
        id: `msg_fake_${prefix}_${String(nextMsg++)}`,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: 1, output_tokens: 1 },
      },
    });
    if (turn.type === 'text') {
      ev('content_block_start', { index: 0, content_block: { type: 'text', text: '' } });
      for (const piece of pieces(turn.text, 24)) ev('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } });
      ev('content_block_stop', { index: 0 });
      ev('message_delta', { delta: { stop_reason: 'end_turn', stop_sequence: null }, usage: { output_tokens: 1 } });
    } else {
      const calls = turn.type === 'tool_use' ? [turn] : turn.calls;
      calls.forEach((c, index) => {
        const id = c.id ?? `toolu_fake_${prefix}_${String(nextTool++)}`;
        ev('content_block_start', { index, content_block: { type: 'tool_use', id, name: c.name, input: {} } });
        for (const piece of pieces(JSON.stringify(c.input), 2, true)) {
          ev('content_block_delta', { index, delta: { type: 'input_json_delta', partial_json: piece } });
        }
        ev('content_block_stop', { index });
      });
      ev('message_delta', { delta: { stop_reason: 'tool_use', stop_sequence: null }, usage: { output_tokens: 1 } });
    }
    ev('message_stop', {});
    res.end();
  }

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  const url = `http://127.0.0.1:${String(port)}`;

  const allToolResults = (): FakeToolResult[] => {
    const seen = new Map<string, FakeToolResult>();
    for (const r of turns) for (const t of lastToolResults(r.body)) if (!seen.has(t.tool_use_id)) seen.set(t.tool_use_id, t);
    return [...seen.values()];
  };

  return {
    url,
    port,
    requests,
    turns,
    errors,
    toolResults: allToolResults,
    toolResult: (id) => allToolResults().find((t) => t.tool_use_id === id),
    env(home, extra = {}) {
      const env: Record<string, string> = {
        PATH: process.env.PATH ?? '/usr/local/bin:/usr/bin:/bin',
        HOME: home ?? process.env.HOME ?? '/',
        ANTHROPIC_BASE_URL: url,
        ANTHROPIC_API_KEY: 'fake-key',
        CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: '1',
        DISABLE_AUTOUPDATER: '1',
        DISABLE_TELEMETRY: '1',
        DISABLE_ERROR_REPORTING: '1',
        CLAUDE_CODE_ENABLE_TELEMETRY: '0',
      };
      return { ...env, ...extra };
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}

/** lastToolResults reads the tool_result blocks of a request's last user message. */
export function lastToolResults(body: unknown): FakeToolResult[] {
  if (typeof body !== 'object' || body === null) return [];
  const messages = (body as { messages?: unknown }).messages;
  if (!Array.isArray(messages)) return [];
  const users = messages.filter((m): m is { role: string; content: unknown } => typeof m === 'object' && m !== null && (m as { role?: unknown }).role === 'user');
  const last = users[users.length - 1];
  if (last === undefined || !Array.isArray(last.content)) return [];
  const out: FakeToolResult[] = [];
  for (const block of last.content as unknown[]) {
    if (typeof block !== 'object' || block === null) continue;
    const b = block as { type?: unknown; tool_use_id?: unknown; content?: unknown; is_error?: unknown };
    if (b.type !== 'tool_result' || typeof b.tool_use_id !== 'string') continue;
    out.push({ tool_use_id: b.tool_use_id, text: flatten(b.content), is_error: b.is_error === true, content: b.content });
  }
  return out;
}

function flatten(content: unknown): string {
  if (typeof content === 'string') return content;
  if (!Array.isArray(content)) return '';
  return content
    .map((c: unknown) => (typeof c === 'object' && c !== null && (c as { type?: unknown }).type === 'text' ? String((c as { text?: unknown }).text ?? '') : ''))
    .filter((t) => t !== '')
    .join('\n');
}

function pieces(s: string, n: number, byCount = false): string[] {
  if (s === '') return [''];
  const size = byCount ? Math.ceil(s.length / n) : n;
  const out: string[] = [];
  for (let i = 0; i < s.length; i += size) out.push(s.slice(i, i + size));
  return out;
}
