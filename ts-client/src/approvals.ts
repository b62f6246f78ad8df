// Asks on nested calls: the policy asked before a call that sandboxed code
// made through the bridge, the sidecar relayed the ask here
// (approval_request), and the caller's canUseTool, the human or the UI in
// front of one, answers it.

import type { CanUseTool } from '@anthropic-ai/claude-agent-sdk';
import type { ApprovalRequestReply } from './protocol.js';

/**
 * NestedCall is what a canUseTool handler is told about a call that a
 * program made, in the `nestedCall` field of its options (beside the SDK's
 * own fields). Its presence is how a handler tells an ask from code from
 * an ask on a tool call of the model's own.
 */
export interface NestedCall {
  /** The sidecar's run id of the run whose program made the call. */
  runId: string;
  /** The model's tool use of that sandboxed_code run (also the options' toolUseID). */
  toolUseId: string;
  /** The program's language: python, node or sh. */
  language: string;
  /** The MCP server and tool, as the program named them. */
  server: string;
  tool: string;
  /** The call's 1-based number within its run. */
  callSeq: number;
  /** The policy's rule and reason for asking. */
  rule: string;
  reason: string;
}

/** What an Approver answers; message reaches the model on a deny. */
export interface ApprovalAnswer {
  decision: 'allow' | 'deny';
  message?: string;
}

/** An Approver answers one approval_request; it never throws. */
export type Approver = (ask: ApprovalRequestReply, signal: AbortSignal) => Promise<ApprovalAnswer>;

/** The most characters of a message the sidecar takes. */
const MAX_MESSAGE_CHARS = 4096;

/**
 * canUseToolApprover answers asks with the caller's canUseTool: the
 * tool's MCP name, a copy of its arguments, and options whose toolUseID
 * is the sandboxed_code run's, requestId the ask's id, decisionReason the
 * policy's reason, mcpServer the server, signal aborted when the sidecar
 * stops waiting, and nestedCall what program asked. An allow lets the call
 * proceed with the arguments the policy saw: an allow that rewrites them
 * (updatedInput) is a deny, since the gate decided the arguments it saw.
 * A deny, null (an answer out of band), or a throw is a deny.
 */
export function canUseToolApprover(canUseTool: CanUseTool): Approver {
  return async (ask, signal) => {
    const nestedCall: NestedCall = {
      runId: ask.run_id,
      toolUseId: ask.tool_use_id,
      language: ask.language,
      server: ask.server,
      tool: ask.tool,
      callSeq: ask.call_seq,
      rule: ask.rule,
      reason: ask.reason,
    };
    const input = JSON.parse(JSON.stringify(ask.arguments)) as Record<string, unknown>;
    const options: Parameters<CanUseTool>[2] & { nestedCall: NestedCall } = {
      signal,
      toolUseID: ask.tool_use_id,
      requestId: ask.id,
      decisionReason: ask.reason,
      title: `A ${ask.language} program (run ${ask.run_id}) wants to call ${ask.tool_name}`,
      mcpServer: { name: ask.server, source: ask.server_source === 'sdk' ? 'sdk' : 'gatekeeper' },
      nestedCall,
    };
    try {
      const r = await canUseTool(ask.tool_name, input, options);
      if (r === null) return { decision: 'deny', message: 'the canUseTool handler answered out of band (it returned null), which gatekeeper cannot see' };
      if (r.behavior !== 'allow') return { decision: 'deny', message: clip(r.message) };
      if (r.updatedInput !== undefined && JSON.stringify(r.updatedInput) !== JSON.stringify(ask.arguments)) {
        return { decision: 'deny', message: 'the canUseTool handler changed the arguments of a call from code, which gatekeeper cannot decide again; allow it unchanged or deny it' };
      }
      return { decision: 'allow' };
    } catch (err) {
      return { decision: 'deny', message: clip(`the canUseTool handler threw: ${err instanceof Error ? err.message : String(err)}`) };
    }
  };
}

function clip(s: string): string {
  return [...s].slice(0, MAX_MESSAGE_CHARS).join('');
}
