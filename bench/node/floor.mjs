// The in-process floor: gatekeeper's built-in policy (rego/gatekeeper.rego)
// written as a plain JavaScript function over the same input object the
// sidecar gives its Rego. No IPC, no policy engine: what a decision costs
// when it is a function call in the agent's own process.
//
// Rules as in gatekeeper.rego: findings go into deny/ask/allow; any deny
// beats any ask beats any allow; among findings of one kind the one whose
// [rule, reason] sorts first is reported; with none, tools.not_allowlisted.

const HOST_FS = new Set(['Read', 'Write', 'Edit', 'MultiEdit', 'NotebookEdit', 'Glob', 'Grep', 'LS']);
const HOST_FS_WRITE = new Set(['Write', 'Edit', 'MultiEdit', 'NotebookEdit']);
const HOST_NET = new Set(['WebFetch', 'WebSearch']);
const SANDBOX_TOOL = 'mcp__sandboxed_code__run';
const TRUSTED_SANDBOX_SOURCES = new Set(['sdk', 'gatekeeper']);
const NAME_RE = /^[A-Za-z0-9_.-]+$/;

/** q quotes like Go's %q for the strings tool names are made of. */
const q = (s) => JSON.stringify(s);

const globCache = new Map();

/**
 * globRegExp compiles a glob as OPA's glob.match(g, ["/"], s) reads it:
 * `**` crosses separators, `*` and `?` do not, `[...]` and `{a,b}` as usual.
 */
function globRegExp(g) {
  let re = globCache.get(g);
  if (re) return re;
  let out = '^';
  for (let i = 0; i < g.length; i++) {
    const c = g[i];
    if (c === '*' && g[i + 1] === '*') {
      out += '.*';
      i++;
    } else if (c === '*') out += '[^/]*';
    else if (c === '?') out += '[^/]';
    else if (c === '[') {
      const end = g.indexOf(']', i + 1);
      if (end < 0) out += '\\[';
      else {
        out += '[' + g.slice(i + 1, end).replace(/^!/, '^').replace(/\\/g, '\\\\') + ']';
        i = end;
      }
    } else if (c === '{') out += '(?:';
    else if (c === '}') out += ')';
    else if (c === ',') out += '|';
    else out += c.replace(/[.+^$()|\\]/g, '\\$&');
  }
  re = new RegExp(out + '$');
  globCache.set(g, re);
  return re;
}

/** covered is a path fact's paths to match deny globs against: both paths and every ancestor. */
function covered(p) {
  if (Array.isArray(p.covered)) return p.covered;
  const out = new Set();
  for (let s of [p.abs, p.resolved]) {
    while (s !== '' && s !== '/' && !out.has(s)) {
      out.add(s);
      const i = s.lastIndexOf('/');
      if (i <= 0) break;
      s = s.slice(0, i);
    }
  }
  return [...out];
}

function within(path, root) {
  return path === root || path.startsWith(root.replace(/\/$/, '') + '/');
}

function shown(p) {
  return p.raw !== p.resolved ? `${p.raw} (resolves to ${p.resolved})` : p.raw;
}

function pick(kind, findings) {
  findings.sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : a[1] < b[1] ? -1 : a[1] > b[1] ? 1 : 0));
  return { decision: kind, reason: findings[0][1], rule: findings[0][0] };
}

/** decide returns {decision, reason, rule} for one Rego input object. */
export function decide(input) {
  const deny = [];
  const ask = [];
  const allow = [];
  const t = input.tool_name;
  const tools = input.policy.tools;
  const net = input.policy.sandbox.net;
  if (tools.deny.includes(t)) deny.push(['tools.deny_list', `tool ${q(t)} is denied by the gatekeeper policy`]);
  if (tools.ask.includes(t)) ask.push(['tools.ask_list', `tool ${q(t)} needs a human's approval under the gatekeeper policy`]);
  const allowlisted = tools.allow.includes(t);
  if (!NAME_RE.test(t)) {
    deny.push(['tools.malformed_name', `tool name ${q(t)} contains characters no real tool name has (only A-Z a-z 0-9 _ . - are valid)`]);
  }
  if (allowlisted && !HOST_FS.has(t) && !HOST_NET.has(t)) allow.push(['tools.allow_list', `tool ${q(t)} is allowlisted`]);

  if (HOST_FS.has(t)) {
    const paths = input.paths;
    if (paths.length === 0) deny.push(['host_fs.no_path', `${t} names no path gatekeeper can check`]);
    for (const p of paths) {
      if (p.error !== '') {
        deny.push(['host_fs.bad_path', `${t}: ${p.error}`]);
        continue;
      }
      if (!within(p.resolved, input.workspace_root)) {
        deny.push(['host_fs.outside_workspace', `${t} of ${shown(p)} is outside the workspace ${input.workspace_root}`]);
      }
      // The sidecar matches the deny globs (deny_matches); a hand-made input
      // without them is matched here, as a rule of your own could.
      const matches = p.deny_matches ?? input.deny_globs.filter((g) => covered(p).some((c) => globRegExp(g).test(c)));
      for (const g of matches) {
        deny.push(['host_fs.deny_glob', `${t} of ${shown(p)} is forbidden by the policy's fs.deny pattern ${q(g)}`]);
      }
      const [w] = p.deny_within;
      if (w !== undefined) {
        deny.push(['host_fs.deny_glob_within', `${t} of ${shown(p)} would also read ${w.path}, which the policy's fs.deny pattern ${q(w.glob)} forbids; search a narrower path that does not contain it, or pass a glob of file names (such as *.py) that leaves it out`]);
      }
      if (p.within_error !== '') deny.push(['host_fs.search_unchecked', `${t}: ${p.within_error}`]);
      const [m] = p.write_protect_matches ?? [];
      if (HOST_FS_WRITE.has(t) && m !== undefined) {
        deny.push(['host_fs.write_protected', `${t} of ${shown(p)} is refused: the path is write-protected (${m.entry}, pattern ${q(m.glob)}) because ${m.why}. Host file tools may read it but never create, change or move into it`]);
      }
    }
    if (allowlisted && paths.length > 0) {
      allow.push(['host_fs.inside_workspace', `${t} of ${paths.map((p) => p.raw).join(', ')} is inside the workspace`]);
    }
  }

  if (HOST_NET.has(t) && !net.enabled) {
    deny.push(['net.disabled', `${t} is denied: the sandbox network policy is disabled (sandbox.net.enabled is false)`]);
  }
  if (t === 'WebFetch') {
    const u = input.url;
    if (u.error !== '') deny.push(['net.bad_url', `WebFetch: ${u.error}`]);
    else {
      // The sidecar matches the net patterns (url.deny_matches, url.allow_matches).
      for (const pat of u.deny_matches ?? []) deny.push(['net.host_denied', `WebFetch of host ${u.host} is forbidden by sandbox.net.deny pattern ${q(pat)}`]);
      if (!(u.allow_matches?.length > 0)) deny.push(['net.host_not_allowed', `WebFetch of host ${u.host} (port ${u.port}) is not in sandbox.net.allow`]);
    }
    if (allowlisted && net.enabled) allow.push(['net.host_allowed', `WebFetch of host ${u.host} is in sandbox.net.allow`]);
  }
  if (t === 'WebSearch' && allowlisted && net.enabled) allow.push(['net.search_allowed', 'WebSearch is allowlisted and the network policy is enabled']);

  const mcp = input.mcp_server;
  if (t === SANDBOX_TOOL && !(mcp && mcp.name === 'sandboxed_code' && TRUSTED_SANDBOX_SOURCES.has(mcp.source))) {
    const prov = mcp ? `MCP server ${q(mcp.name)} (source ${q(mcp.source)})` : 'an unknown MCP server';
    deny.push(['mcp.untrusted_sandboxed_code', `${SANDBOX_TOOL} is only trusted from gatekeeper's in-process SDK server; this call comes from ${prov}`]);
  }
  if (mcp && !t.startsWith(`mcp__${mcp.name}__`)) {
    deny.push(['mcp.server_mismatch', `tool ${q(t)} does not belong to MCP server ${q(mcp.name)}`]);
  }
  if (t === SANDBOX_TOOL) {
    const lang = input.tool_input.language ?? '';
    const langs = input.run_languages ?? [];
    if (!langs.includes(lang)) deny.push(['run.bad_language', `language ${q(lang)} is not one of ${langs.join(', ')}`]);
  }

  if (deny.length > 0) return pick('deny', deny);
  if (ask.length > 0) return pick('ask', ask);
  if (allow.length > 0) return pick('allow', allow);
  return { decision: 'deny', reason: `tool ${q(t)} is not allowlisted by the gatekeeper policy`, rule: 'tools.not_allowlisted' };
}
