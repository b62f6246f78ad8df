// The harness of the seed workloads (issue 11, section 5): each workload is
// a small project a model would do in the sandbox, run through the real
// path (Agent SDK → @gatekeeper/client → gatekeeper serve → Docker) with
// the scripted fake model, and checked against figures the workload
// computes itself. The runner (run.ts) prints one transcript per workload
// and a table: project, result, duration, peak memory.

import type { FakeModel } from '@gatekeeper/client/testing';
import { runAgent, type AgentOptions, type AgentRun, type Outcome, type RunReport, type Step } from '../lib/agent.js';
import type { Transcript } from '../lib/transcript.js';
import { startWorld, type World, type WorldOptions } from '../lib/world.js';

/** Workload is one sample project. */
export interface Workload {
  /** Its number in issue 11, section 5. */
  n: number;
  /** The project, as the table names it. */
  name: string;
  /** What it shows, for its transcript's header. */
  about: string[];
  /**
   * run does the project and checks it (with c.t.expect); it returns what
   * was computed, in a few words, for the table's result column.
   */
  run(c: Ctx): Promise<string>;
}

/** RunFigures are the sandbox's own figures of one run, from its audit line. */
export interface RunFigures {
  durationMs: number;
  peakBytes: number;
}

/**
 * Ctx is what a workload works with: its transcript, worlds (sidecars) it
 * starts, which are stopped when it ends, and queries whose runs are
 * counted for the table.
 */
export class Ctx {
  readonly runs: RunFigures[] = [];
  private readonly worlds: World[] = [];

  constructor(
    readonly t: Transcript,
    private readonly n: number,
  ) {}

  /** world starts a sidecar for this workload. */
  async world(o: Omit<WorldOptions, 'n'> = {}): Promise<World> {
    const w = await startWorld({ ...o, n: 100 + this.n });
    this.worlds.push(w);
    this.t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}), image ${o.policy?.image ?? 'python'}, instance ${w.instance}`);
    return w;
  }

  /** agent runs one query of scripted tool calls (lib/agent.ts) and counts its runs. */
  async agent(w: World, steps: Step[], o: AgentOptions): Promise<AgentRun> {
    const run = await runAgent(w, this.t, steps, o);
    for (const out of run.outcomes) {
      const r = out.run;
      if (r?.duration_ms !== undefined) this.runs.push({ durationMs: r.duration_ms, peakBytes: r.peak_memory_bytes ?? 0 });
    }
    return run;
  }

  /** close stops every world this workload started. */
  async close(): Promise<void> {
    for (const w of this.worlds.splice(0)) await w.stop();
  }
}

/** mulberry32 is a small seeded PRNG: the same seed, the same data, in every run. */
export function mulberry32(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** pick chooses one of xs with rnd. */
export function pick<T>(rnd: () => number, xs: readonly T[]): T {
  return xs[Math.floor(rnd() * xs.length)] as T;
}

/** cents renders an amount of cents as a decimal, 2 places ("1234.05"). */
export function cents(n: number): string {
  const sign = n < 0 ? '-' : '';
  const a = Math.abs(n);
  return `${sign}${String(Math.floor(a / 100))}.${String(a % 100).padStart(2, '0')}`;
}

/** fileText is the text of a file the run returned, as the model read it. */
export function fileText(r: RunReport | undefined, path: string): string | undefined {
  return r?.files?.find((f) => f.path === path)?.text;
}

/** ReceivedImage is an image block the fake model received in a tool_result. */
export interface ReceivedImage {
  mediaType: string;
  data: Buffer;
}

/**
 * imagesReceived reads, from the requests the fake model received, the
 * image blocks of the tool_result answering toolUseId: what the model
 * itself was shown.
 */
export function imagesReceived(fake: FakeModel, toolUseId: string): ReceivedImage[] {
  const seen = new Map<string, ReceivedImage>();
  for (const req of fake.requests) {
    const messages = (req.body as { messages?: { role?: string; content?: unknown }[] } | undefined)?.messages ?? [];
    for (const m of messages) {
      if (m.role !== 'user' || !Array.isArray(m.content)) continue;
      for (const block of m.content as { type?: string; tool_use_id?: string; content?: unknown }[]) {
        if (block.type !== 'tool_result' || block.tool_use_id !== toolUseId || !Array.isArray(block.content)) continue;
        for (const c of block.content as { type?: string; source?: { type?: string; media_type?: string; data?: string } }[]) {
          if (c.type === 'image' && c.source?.type === 'base64' && typeof c.source.data === 'string') {
            seen.set(c.source.data, { mediaType: c.source.media_type ?? '', data: Buffer.from(c.source.data, 'base64') });
          }
        }
      }
    }
  }
  return [...seen.values()];
}

/** pngSize reads a PNG's width and height from its IHDR chunk; undefined when it is no PNG. */
export function pngSize(png: Buffer): { width: number; height: number } | undefined {
  if (png.length < 24 || png.subarray(0, 8).toString('hex') !== '89504e470d0a1a0a' || png.subarray(12, 16).toString('latin1') !== 'IHDR') return undefined;
  return { width: png.readUInt32BE(16), height: png.readUInt32BE(20) };
}

/** ranOk checks that a run exited 0 by itself and returns its report. */
export function ranOk(t: Transcript, o: Outcome): RunReport | undefined {
  const r = o.sandbox;
  t.expect(r?.exit_code === 0 && r.reason === 'exited', 'the run exited 0', r === undefined ? `tool_result: ${JSON.stringify(o.result)}` : `exit ${String(r.exit_code)} (${r.reason})\nstdout: ${r.stdout.slice(-1500)}\nstderr: ${r.stderr.slice(-1500)}`);
  return r;
}

/** mib renders bytes as MiB with one decimal. */
export function mib(bytes: number): string {
  return `${(bytes / (1 << 20)).toFixed(1)} MiB`;
}
