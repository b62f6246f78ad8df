// Runs one real Agent SDK query through @gatekeeper/client against a world's
// sidecar, with the loopback fake model playing a script of tool calls. Each
// step is reported as it happens: what the model asked, what gatekeeper
// decided (read back from the sidecar's audit log, which is written before
// every reply), what the sandbox returned, and the step's expectations.

import type { McpServerConfig, SDKMessage } from '@anthropic-ai/claude-agent-sdk';
import { query, type SandboxPolicy, type SandboxRun, type SandboxRunReport } from '@gatekeeper/client';
import { startFakeModel, type FakeModel, type FakeScriptStep, type FakeToolResult } from '@gatekeeper/client/testing';
import { clip, type Transcript } from './transcript.js';
import { readAudit, type AuditRecord, type World } from './world.js';

export const RUN = 'mcp__sandboxed_code__run';

/** ToolCall is what the model asks for. */
export interface ToolCall {
  name: string;
  input: Record<string, unknown>;
}

/** RunReport is the structured result of a sandbox run, as the model reads it (the client's own type). */
export type RunReport = SandboxRunReport;

/** Outcome is everything known about one step once the model got its result. */
export interface Outcome {
  /** The tool_use id of the call. */
  id: string;
  call: ToolCall;
  /** gatekeeper's decisions on the call, in order (PreToolUse, canUseTool). */
  decisions: AuditRecord[];
  /** The sidecar's run record (kind "run"), for sandbox calls that reached it. */
  run?: AuditRecord;
  /** The egress proxy's records (kind "egress") of that run, in order. */
  egress: AuditRecord[];
  /** The tool_result the model got back. */
  result?: FakeToolResult;
  /** The run's structured result, when the model got one. */
  sandbox?: RunReport;
  /** Every request body the model has received so far, as JSON text. */
  modelSaw: string;
}

/** Step is one tool call of the script, with what must hold afterwards. */
export interface Step {
  /** What the model is trying, in words. */
  say: string;
  call: ToolCall;
  /** Runs just before the model makes the call (start a probe, plant a file). */
  before?: () => void | Promise<void>;
  /** The step's expectations. */
  check?: (o: Outcome, t: Transcript) => void | Promise<void>;
}

/** AgentOptions configure runAgent. */
export interface AgentOptions {
  prompt: string;
  sandboxPolicy?: SandboxPolicy;
  /** Extra environment of the agent (Claude Code). */
  env?: Record<string, string>;
  /** The agent's own MCP servers. */
  mcpServers?: Record<string, McpServerConfig>;
  /** The model's closing words, from the outcomes. */
  finalText?: (outcomes: Outcome[]) => string;
  /** A tag for the tool use ids, unique within the walkthrough. */
  tag: string;
  /** Bound on the whole query, ms (default 120 s). */
  timeoutMs?: number;
  /** The agent's working directory (default: the workspace). */
  cwd?: string;
  /** The client's onSandboxRun: every finished run, with the bytes of the files it returned. */
  onSandboxRun?: (run: SandboxRun) => void | Promise<void>;
}

/** AgentRun is what runAgent returns. */
export interface AgentRun {
  outcomes: Outcome[];
  messages: SDKMessage[];
  /** The error the iteration ended with, if any (the walkthrough has failed then). */
  error?: unknown;
  fake: FakeModel;
  stderr: string;
}

/** describeCall renders a tool call for one transcript line. */
export function describeCall(c: ToolCall): string {
  if (c.name === RUN) {
    const i = c.input as { language?: string; code?: string; files?: Record<string, string>; timeout_s?: number };
    const files = i.files ? ` + files ${Object.keys(i.files).join(', ')}` : '';
    const timeout = i.timeout_s !== undefined ? ` (timeout_s ${String(i.timeout_s)})` : '';
    return `${RUN} ${i.language ?? '?'}: ${clip(i.code ?? '', 90)}${files}${timeout}`;
  }
  return `${c.name} ${clip(JSON.stringify(c.input), 110)}`;
}

/** canonical is JSON with object keys sorted, to compare inputs and results. */
export function canonical(v: unknown): string {
  return JSON.stringify(v, (_k, x: unknown) =>
    typeof x === 'object' && x !== null && !Array.isArray(x) ? Object.fromEntries(Object.entries(x as Record<string, unknown>).sort(([a], [b]) => a.localeCompare(b))) : x,
  );
}

function parseRun(r: FakeToolResult | undefined): RunReport | undefined {
  if (r === undefined || r.is_error) return undefined;
  try {
    // Claude Code sends the structuredContent as the whole content, or,
    // beside the images a run returned, as the last text block.
    const blocks = Array.isArray(r.content) ? (r.content as { type?: string; text?: string }[]) : [];
    const json = typeof r.content === 'string' ? r.content : (blocks.filter((b) => b.type === 'text').at(-1)?.text ?? r.text);
    const v = JSON.parse(json) as Partial<RunReport>;
    if (typeof v.exit_code === 'number' && typeof v.reason === 'string') return v as RunReport;
  } catch {
    // not a run result
  }
  return undefined;
}

function printOutcome(t: Transcript, o: Outcome): void {
  const seen = o.decisions[0]?.tool_input;
  if (seen !== undefined && o.call.name !== RUN && !canonical(seen).includes('"***"') && canonical(seen) !== canonical(o.call.input)) {
    t.line('hook', `Claude Code asked gatekeeper about ${clip(JSON.stringify(seen), 110)}`);
  }
  for (const d of o.decisions) {
    t.line('gate', `${(d.event ?? '').padEnd(10)} → ${String(d.decision)}  ${String(d.rule)}: ${clip(d.reason ?? '', 120)}`);
  }
  if (o.run !== undefined) {
    const r = o.run;
    if (r.decision === 'deny') t.line('gate', `run        → deny  ${String(r.rule)}: ${clip(r.reason ?? '', 120)}`);
    else if (r.outcome === 'error') t.line('runner', `refused: ${clip(r.error ?? '', 140)}`);
    else t.line('gate', `run        → ${String(r.decision)}  ${String(r.rule)} (the sidecar decides the run's own input again)`);
  }
  for (const e of o.egress) {
    const req = e.method !== undefined && e.method !== 'CONNECT' ? ` ${e.method} ${e.path ?? ''} → ${e.status !== undefined ? String(e.status) : '-'}` : '';
    const injected = e.secrets !== undefined && e.secrets.length > 0 ? `  secrets ${e.secrets.join(',')}` : '';
    t.line('egress', `${String(e.decision)} ${String(e.host)}:${String(e.port)}${req}  ${String(e.rule)}${injected}`);
  }
  const s = o.sandbox;
  if (s !== undefined) {
    const run = o.run;
    const where = run?.runtime !== undefined ? ` · ${run.runtime} · ${String(run.image)}` : '';
    t.line('sandbox', `${s.reason} · exit ${String(s.exit_code)} · ${String(s.duration_ms ?? '?')} ms${where} · truncated=${String(s.truncated)} timed_out=${String(s.timed_out)} oom_killed=${String(s.oom_killed)}`);
    const show = (tag: string, text: string): void => {
      if (text === '') return;
      const lines = text.replace(/\n$/, '').split('\n');
      const shown = lines.slice(0, 14).map((l) => clip(l, 110));
      if (lines.length > 14) shown.push(`… (${String(lines.length - 14)} more lines)`);
      else if (text.length > 4096) shown.push(`… (${String(text.length)} bytes in all)`);
      t.line(tag, shown.join('\n'));
    };
    show('stdout', s.stdout);
    show('stderr', s.stderr);
  } else if (o.result !== undefined) {
    t.line('model ←', `${o.result.is_error ? '(error) ' : ''}${clip(o.result.text, 160)}`);
  } else {
    t.line('model ←', '(no tool_result)');
  }
}

/** runAgent runs the steps as one query and reports each step as it completes. */
export async function runAgent(w: World, t: Transcript, steps: Step[], o: AgentOptions): Promise<AgentRun> {
  const ids = steps.map((_, i) => `toolu_wt_${o.tag}_${String(i + 1)}`);
  const outcomes: Outcome[] = [];
  let fake: FakeModel | undefined;
  let reported = 0;

  const collect = (i: number): Outcome => {
    const id = ids[i] ?? '';
    const step = steps[i] as Step;
    const all = readAudit(w.auditLog);
    const audit = all.filter((r) => r.tool_use_id === id);
    const run = audit.find((r) => r.kind === 'run');
    const result = fake?.toolResult(id);
    return {
      id,
      call: step.call,
      decisions: audit.filter((r) => r.kind === 'decision'),
      run,
      egress: run?.run_id === undefined ? [] : all.filter((r) => r.kind === 'egress' && r.run_id === run.run_id),
      result,
      sandbox: step.call.name === RUN ? parseRun(result) : undefined,
      modelSaw: JSON.stringify(fake?.requests.map((r) => r.body) ?? []),
    };
  };
  const report = async (upTo: number): Promise<void> => {
    while (reported < upTo) {
      const i = reported++;
      const out = collect(i);
      outcomes[i] = out;
      printOutcome(t, out);
      if (out.result === undefined) {
        t.fail(`step ${String(i + 1)}: the model got a tool_result`);
        continue;
      }
      try {
        await steps[i]?.check?.(out, t);
      } catch (err) {
        t.fail(`step ${String(i + 1)}: its checks ran to the end`, err instanceof Error ? (err.stack ?? err.message) : String(err));
      }
    }
  };

  const script: FakeScriptStep[] = steps.map((s, i) => async () => {
    await report(i);
    await s.before?.();
    t.step(`step ${String(i + 1)}`, s.say);
    t.line('model →', describeCall(s.call));
    return { type: 'tool_use', name: s.call.name, input: s.call.input, id: ids[i] };
  });
  script.push(async () => {
    await report(steps.length);
    return { type: 'text', text: o.finalText?.(outcomes) ?? 'Done.' };
  });
  fake = await startFakeModel({ script });

  const stderr: string[] = [];
  const messages: SDKMessage[] = [];
  let error: unknown;
  const q = query({
    prompt: o.prompt,
    options: {
      cwd: o.cwd ?? w.dirs.ws,
      env: fake.env(w.dirs.home, o.env),
      settingSources: [],
      maxTurns: steps.length + 3,
      stderr: (d: string) => {
        stderr.push(d);
      },
      ...(o.mcpServers ? { mcpServers: o.mcpServers } : {}),
      ...(o.sandboxPolicy ? { sandboxPolicy: o.sandboxPolicy } : {}),
      ...(o.onSandboxRun ? { onSandboxRun: o.onSandboxRun } : {}),
      gatekeeper: { url: w.url, tokenFile: w.tokenFile },
    },
  });
  const limit = o.timeoutMs ?? 120_000;
  let timer: NodeJS.Timeout | undefined;
  try {
    await Promise.race([
      (async () => {
        for await (const m of q) messages.push(m);
      })(),
      new Promise<never>((_, reject) => {
        timer = setTimeout(() => reject(new Error(`the query was still running after ${String(limit / 1000)} s`)), limit);
      }),
    ]);
  } catch (err) {
    error = err;
    q.close();
  } finally {
    clearTimeout(timer);
  }
  await fake.close();
  await report(steps.length);
  for (const e of fake.errors) t.fail('the fake model ran its script without errors', e);
  if (error !== undefined) {
    // A refused override included: the scenarios expect their queries to
    // run; a refusal is checked with query() itself (walkthrough 2).
    t.fail('the query ran to its end', `${String(error)}\nClaude Code stderr:\n${stderr.join('').slice(-3000)}\nsidecar log:\n${w.log().slice(-3000)}`);
  }
  const result = messages.find((m) => m.type === 'result');
  if (result !== undefined && 'result' in result && typeof result.result === 'string' && steps.length > 0) {
    t.line('model', `"${clip(result.result, 150)}"`);
  }
  return { outcomes, messages, error, fake, stderr: stderr.join('') };
}

/** ruleTag is how a gatekeeper deny reads in the model's tool_result. */
export const ruleTag = (rule: string): string => `[gatekeeper rule: ${rule}]`;

/**
 * expectDenied checks that gatekeeper's first decision on the call was a
 * deny by `rule`, and that the model got an error carrying that rule.
 */
export function expectDenied(t: Transcript, o: Outcome, rule: string): void {
  const first = o.decisions[0];
  t.expect(
    first?.decision === 'deny' && first.rule === rule,
    `${o.call.name} denied by ${rule}`,
    `decisions: ${JSON.stringify(o.decisions.map((d) => [d.event, d.decision, d.rule]))}`,
  );
  t.expect(
    o.result?.is_error === true && o.result.text.includes(ruleTag(rule)),
    `the model was told why, with ${ruleTag(rule)}`,
    `tool_result: ${JSON.stringify(o.result)}`,
  );
}

/** expectAllowed checks every decision on the call was an allow by `rule`. */
export function expectAllowed(t: Transcript, o: Outcome, rule: string): void {
  t.expect(
    o.decisions.length > 0 && o.decisions.every((d) => d.decision === 'allow' && d.rule === rule),
    `${o.call.name} allowed by ${rule}`,
    `decisions: ${JSON.stringify(o.decisions.map((d) => [d.event, d.decision, d.rule]))}`,
  );
}

/** expectRan checks a sandbox call was allowed, ran, and returned a structured result. */
export function expectRan(t: Transcript, o: Outcome): RunReport | undefined {
  expectAllowed(t, o, 'tools.allow_list');
  t.expect(o.run?.decision === 'allow', 'the sidecar decided the run again and allowed it', `run record: ${JSON.stringify(o.run)}`);
  t.expect(o.sandbox !== undefined, 'the model got the run result', `tool_result: ${JSON.stringify(o.result)}`);
  return o.sandbox;
}

/** probeLines parses "label value" lines a probe script printed. */
export function probeLines(stdout: string): Map<string, string> {
  const m = new Map<string, string>();
  for (const l of stdout.split('\n')) {
    const i = l.indexOf(' ');
    if (i > 0) m.set(l.slice(0, i), l.slice(i + 1));
  }
  return m;
}
