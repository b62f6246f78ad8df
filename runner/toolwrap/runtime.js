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
// tool by its MCP name and resolves to the whole MCP result. No base64
// reaches the program: an image, audio or embedded resource is written to
// a new file under /tmp/gatekeeper-results and stands as { type: 'file',
// kind, path, mimeType, size } (see FileItem in index.d.ts). Every call is
// decided by gatekeeper's policy and written to its audit log; a call that
// gets no result rejects with a ToolCallError (kind, rule, message), as
// does a tool that reports an error (kind "tool_error").

const fs = require('fs');
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

// RESULTS is where an image, audio or embedded resource of a result is
// written, one file each, so that no base64 reaches the program's values.
const RESULTS = process.env.GATEKEEPER_RESULTS || '/tmp/gatekeeper-results';

// EXTENSIONS names a file by its MIME type; any other type is .bin. The
// server's names and URIs never name a file.
const EXTENSIONS = {
  'image/png': '.png', 'image/jpeg': '.jpg', 'image/gif': '.gif', 'image/webp': '.webp',
  'image/svg+xml': '.svg', 'audio/wav': '.wav', 'audio/x-wav': '.wav', 'audio/mpeg': '.mp3',
  'audio/ogg': '.ogg', 'application/pdf': '.pdf', 'application/json': '.json',
  'text/plain': '.txt', 'text/csv': '.csv', 'text/html': '.html', 'text/markdown': '.md',
  'application/zip': '.zip', 'application/gzip': '.gz',
};
let nextFile = 1;

function save(data, mime) {
  fs.mkdirSync(RESULTS, { recursive: true, mode: 0o700 });
  const key = mime.split(';')[0].trim().toLowerCase();
  const ext = Object.prototype.hasOwnProperty.call(EXTENSIONS, key) ? EXTENSIONS[key] : '.bin';
  const file = path.join(RESULTS, `${process.pid}-${nextFile++}${ext}`);
  fs.writeFileSync(file, data, { flag: 'wx', mode: 0o600 });
  return file;
}

const BASE64 = /^[A-Za-z0-9+/]*={0,2}$/;

function decode(b64, what) {
  if (typeof b64 !== 'string' || b64.length % 4 !== 0 || !BASE64.test(b64)) {
    throw toolError('server', '', `the tool's ${what} is not base64`);
  }
  return Buffer.from(b64, 'base64');
}

// file writes an image, audio or embedded resource item to a file and
// returns the small object that stands for it.
function file(item) {
  let data;
  let mime;
  let out;
  if (item.type === 'resource') {
    const res = item.resource && typeof item.resource === 'object' ? item.resource : {};
    mime = String(res.mimeType || '');
    if (typeof res.blob === 'string') {
      data = decode(res.blob, 'embedded resource');
      mime = mime || 'application/octet-stream';
    } else {
      data = Buffer.from(String(res.text || ''), 'utf8');
      mime = mime || 'text/plain';
    }
    out = { type: 'file', kind: 'resource', uri: String(res.uri || '') };
  } else {
    mime = String(item.mimeType || 'application/octet-stream');
    data = decode(item.data, item.type);
    out = { type: 'file', kind: item.type };
  }
  return Object.assign(out, { path: save(data, mime), mimeType: mime, size: data.length });
}

// filesOf replaces each image, audio and embedded resource item of
// result's content by the file it is written to; a resource_link stays as
// it is, never fetched.
function filesOf(result) {
  if (!Array.isArray(result.content)) return result;
  result.content = result.content.map((item) =>
    item && (item.type === 'image' || item.type === 'audio' || item.type === 'resource') ? file(item) : item);
  return result;
}

// content is what a tool without an output schema resolves to: its text
// when its content is all text, else its items in order (text as a string,
// files and links as objects).
function content(result) {
  const items = (Array.isArray(result.content) ? result.content : []).filter((i) => i && typeof i === 'object');
  if (items.every((i) => i.type === 'text')) return text(result);
  return items.map((i) => (i.type === 'text' && typeof i.text === 'string' ? i.text : i));
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
  filesOf(result);
  if (result.isError) {
    throw new ToolCallError('tool_error', '', text(result) || 'the tool reported an error', result);
  }
  return result;
}

async function _invoke(server, tool, args, structured) {
  const result = await call(server, tool, args);
  if (!structured) return content(result);
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
};
// The server modules reach _invoke by a symbol, so that the package's
// keys, and a program's completion, show only the public names.
Object.defineProperty(module.exports, Symbol.for('gatekeeper-tools.invoke'), { value: _invoke });
