// A second, raw connection to the sidecar that speaks docs/protocol.md
// itself (the `ws` package over the Unix socket) and asks for a decision
// every few milliseconds, recording how long each answer took. Walkthrough 6
// runs it while the sandbox is being abused, to show the sidecar keeps
// deciding.

import { readFileSync } from 'node:fs';
import WebSocket from 'ws';

/** Sample is one decide and its answer. */
export interface Sample {
  sentAt: number;
  ms: number;
  decision: string;
  rule: string;
}

/** DecisionProbe asks for decisions in a loop until stopped. */
export interface DecisionProbe {
  /** Samples answered since the last window() call, and starts a new window. */
  window(): { samples: Sample[]; unanswered: number };
  /** Every sample so far. */
  readonly all: Sample[];
  stop(): Promise<void>;
}

interface Frame {
  type: string;
  id: string;
  [k: string]: unknown;
}

/**
 * startDecisionProbe connects, opens a query and sends one decide every
 * `everyMs` for `call`, keeping at most one in flight.
 */
export async function startDecisionProbe(socketPath: string, tokenFile: string, call: { tool_name: string; tool_input: Record<string, unknown> }, everyMs = 100): Promise<DecisionProbe> {
  const token = readFileSync(tokenFile, 'utf8').trim();
  const ws = new WebSocket(`ws+unix://${socketPath}:/v1/ws`, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
  const waiting = new Map<string, (f: Frame) => void>();
  ws.on('message', (data) => {
    const f = JSON.parse(String(data)) as Frame;
    waiting.get(f.id)?.(f);
    waiting.delete(f.id);
  });
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
  });
  let seq = 0;
  const ask = (frame: Record<string, unknown>, timeoutMs = 10_000): Promise<Frame> => {
    const id = `p${String(++seq)}`;
    return new Promise((resolve, reject) => {
      const timer = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`no reply to ${String(frame.type)} within ${String(timeoutMs)} ms`));
      }, timeoutMs);
      waiting.set(id, (f) => {
        clearTimeout(timer);
        resolve(f);
      });
      ws.send(JSON.stringify({ ...frame, id }));
    });
  };
  const welcome = await ask({ type: 'hello', v: 1, client: 'walkthrough-probe' });
  if (welcome.type !== 'welcome') throw new Error(`hello answered with ${JSON.stringify(welcome)}`);
  const opened = await ask({ type: 'open_query' });
  if (opened.type !== 'query_opened') throw new Error(`open_query answered with ${JSON.stringify(opened)}`);
  const queryId = String(opened.query_id);

  const all: Sample[] = [];
  let windowStart = 0;
  let windowUnanswered = 0;
  let stopped = false;
  const loop = (async () => {
    let n = 0;
    while (!stopped) {
      const sentAt = Date.now();
      try {
        const f = await ask({ type: 'decide', query_id: queryId, event: 'PreToolUse', tool_name: call.tool_name, tool_input: call.tool_input, tool_use_id: `toolu_probe_${String(++n)}` }, 5000);
        all.push({ sentAt, ms: Date.now() - sentAt, decision: String(f.decision ?? f.type), rule: String(f.rule ?? f.code) });
      } catch {
        windowUnanswered++;
      }
      const wait = everyMs - (Date.now() - sentAt);
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
    }
  })();
  return {
    all,
    window() {
      const samples = all.slice(windowStart);
      windowStart = all.length;
      const u = windowUnanswered;
      windowUnanswered = 0;
      return { samples, unanswered: u };
    },
    stop: async () => {
      stopped = true;
      await loop;
      ws.close();
    },
  };
}
