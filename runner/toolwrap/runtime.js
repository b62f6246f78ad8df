'use strict';
// gatekeeper-tools: call the MCP tools this run may call, through gatekeeper.
//
// Each server the policy lets this program call is a module of this package
// with one async function per tool, taking one object of arguments:
//
//   const crm = require('gatekeeper-tools/crm');
//   const customers = await crm.find_customers({ city: 'London', limit: 100 });
//
// Their types and docs are in crm.d.ts. call(server, tool, args) calls a
// tool by its MCP name and resolves to the whole MCP result. Every call is
// decided by gatekeeper's policy and written to its audit log; a call that
// gets no result rejects with a ToolCallError (kind, rule, message), as
// does a tool that reports an error (kind "tool_error").

const net = require('net');
const path = require('path');

// MANIFEST is generated: every server of this package, its module, what it
// is for and its tools (MCP name -> function name).
const MANIFEST = JSON.parse('{}');

class ToolCallError extends Error {
  constructor(kind, rule, message, result) {
    super(message);
    this.kind = kind;
    this.rule = rule;
    this.result = result;
  }
}
class ToolCallDenied extends ToolCallError {}
class ToolCallLimit extends ToolCallError {}
class ToolCallTimeout extends ToolCallError {}
class ToolServerError extends ToolCallError {}
class ToolCallCancelled extends ToolCallError {}
class ToolCallBadRequest extends ToolCallError {}
for (const c of [ToolCallError, ToolCallDenied, ToolCallLimit, ToolCallTimeout, ToolServerError, ToolCallCancelled, ToolCallBadRequest]) {
  Object.defineProperty(c.prototype, 'name', { value: c.name });
}

const KINDS = {
  denied: ToolCallDenied,
  limit: ToolCallLimit,
  timeout: ToolCallTimeout,
  server: ToolServerError,
  cancelled: ToolCallCancelled,
  bad_request: ToolCallBadRequest,
};

function toolError(kind, rule, message, result) {
  const C = Object.prototype.hasOwnProperty.call(KINDS, kind) ? KINDS[kind] : ToolCallError;
  return new C(kind, rule, message, result);
}

let nextId = 1;
let conn = null;

// connect returns the connection shared by every call of this process. The
// socket is unref'd while no call is pending, so it never keeps the program
// alive; if it breaks, or the bridge sends a line that is not an answer,
// every pending call rejects with kind "bridge" and the next call connects
// again.
function connect() {
  if (conn !== null && conn.closed === null) return conn;
  const root = process.env.GATEKEEPER_TOOLS || '';
  if (root === '') {
    throw toolError('bridge', '', "no tools can be called from this run (gatekeeper's bridge is not there)");
  }
  const c = { socket: null, pending: new Map(), closed: null, buf: '' };
  const close = (reason) => {
    if (c.closed !== null) return;
    c.closed = reason;
    c.socket.destroy();
    for (const p of c.pending.values()) p.reject(toolError('bridge', '', reason));
    c.pending.clear();
  };
  c.socket = net.createConnection(path.join(root, 'bridge.sock'));
  c.socket.setEncoding('utf8');
  c.socket.unref();
  c.socket.on('error', (e) => close(`cannot reach gatekeeper's bridge: ${e.message}`));
  c.socket.on('close', () => close("gatekeeper's bridge closed the connection"));
  c.socket.on('data', (chunk) => {
    // Only the new chunk is searched for the end of a line, so a large
    // answer arriving in many chunks costs its length, not its square.
    let from = c.buf.length;
    c.buf += chunk;
    let nl;
    while ((nl = c.buf.indexOf('\n', from)) >= 0) {
      const line = c.buf.slice(0, nl);
      c.buf = c.buf.slice(nl + 1);
      from = 0;
      let answer;
      try {
        answer = JSON.parse(line);
      } catch {
        answer = null;
      }
      if (answer === null || typeof answer !== 'object' || !('id' in answer)) {
        close("gatekeeper's bridge sent a line that is not an answer");
        return;
      }
      const p = c.pending.get(answer.id);
      if (p === undefined) continue;
      c.pending.delete(answer.id);
      if (c.pending.size === 0) c.socket.unref();
      p.resolve(answer);
    }
  });
  conn = c;
  return c;
}

function text(result) {
  const parts = [];
  for (const item of Array.isArray(result.content) ? result.content : []) {
    if (item && item.type === 'text' && typeof item.text === 'string') parts.push(item.text);
  }
  return parts.join('\n');
}

/**
 * call calls tool of server with args (an object) and resolves to its MCP
 * result; it rejects with a ToolCallError when the call gets no result, and
 * with kind "tool_error" when the tool reports an error (isError).
 */
async function call(server, tool, args) {
  if (args === undefined) args = {};
  if (args === null || typeof args !== 'object' || Array.isArray(args)) {
    throw new TypeError('arguments must be an object');
  }
  const id = nextId++;
  const line = JSON.stringify({ id, server, tool, arguments: args }) + '\n';
  const c = connect();
  const answer = await new Promise((resolve, reject) => {
    c.pending.set(id, { resolve, reject });
    c.socket.ref();
    c.socket.write(line);
  });
  if (answer.ok !== true) {
    const e = answer.error && typeof answer.error === 'object' ? answer.error : {};
    throw toolError(String(e.kind || 'bridge'), String(e.rule || ''), String(e.message || 'the call failed'));
  }
  const result = answer.result;
  if (result === null || typeof result !== 'object') {
    throw toolError('bridge', '', "gatekeeper's bridge sent an answer with no result");
  }
  if (result.isError) {
    throw new ToolCallError('tool_error', '', text(result) || 'the tool reported an error', result);
  }
  return result;
}

async function _invoke(server, tool, args, structured) {
  const result = await call(server, tool, args);
  if (!structured) return text(result);
  if ('structuredContent' in result) return result.structuredContent;
  try {
    return JSON.parse(text(result));
  } catch {
    throw new ToolCallError('tool_error', '', 'the tool declares an output schema but returned no structured content', result);
  }
}

/** servers returns the servers this program may call. */
function servers() {
  return JSON.parse(JSON.stringify(MANIFEST));
}

module.exports = {
  call,
  servers,
  ToolCallError,
  ToolCallDenied,
  ToolCallLimit,
  ToolCallTimeout,
  ToolServerError,
  ToolCallCancelled,
  ToolCallBadRequest,
  _invoke,
};
