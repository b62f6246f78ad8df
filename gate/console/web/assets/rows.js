// rows.js: one table row per audit record, shared by the stream and the
// query view.
import { bytes, h, pretty, shortID, time, verdict } from './dom.js';

/** details is the last column: the reason of a decision, the end of a run (and its session), the override of a query, a session's start or end, the host of an egress tunnel or an intercepted request's status and secrets, the file a rotation continues. */
export function details(rec) {
  switch (rec.kind) {
    case 'run': {
      const parts = [];
      if (rec.outcome) parts.push(rec.outcome.replace('_', ' '));
      if (rec.exit_code !== undefined) parts.push(`exit ${rec.exit_code}`);
      if (rec.outcome && rec.outcome !== 'error') parts.push(`${rec.duration_ms ?? 0} ms`, rec.peak_memory_bytes ? `peak ${bytes(rec.peak_memory_bytes)}` : 'peak unknown');
      if (rec.runtime) parts.push(rec.runtime);
      if (rec.image) parts.push(rec.image);
      if (rec.truncated) parts.push('output truncated');
      if (rec.tool_calls) parts.push(`${rec.tool_calls} nested calls`);
      if (rec.session_run) parts.push(`session ${shortID(rec.session_id)} run ${rec.session_run}`);
      if (rec.state_lost) parts.push(`state lost (${rec.state_lost.reason}, ${rec.state_lost.fresh ? 'fresh session' : 'lost in this run'})`);
      if (rec.error) parts.push(rec.error);
      if (rec.reason) parts.push(rec.reason);
      return parts.join(' · ');
    }
    case 'code_call':
      return codeCall(rec);
    case 'egress':
      if (isRequest(rec)) return request(rec);
      return `${rec.host}:${rec.port} ↑${bytes(rec.bytes_up ?? 0)} ↓${bytes(rec.bytes_down ?? 0)} ${rec.reason ?? ''}${rec.error ?? ''}`;
    case 'query':
      return `${rec.tool_input === undefined ? 'no override' : `override ${JSON.stringify(rec.tool_input)}`}${rec.reason ? ` — ${rec.reason}` : ''}`;
    case 'session': {
      // As gatekeeper tail prints it (gate/console/format.go, sessionText).
      const parts = [`session ${rec.session_id ?? '?'}`];
      if (rec.event === 'session_end') parts.push(`ended: ${rec.reason ?? '?'}`, `${rec.runs ?? 0} runs`);
      if (rec.sandbox) parts.push(`sandbox ${rec.sandbox}`);
      if (rec.started) parts.push(`started ${time(rec.started)}`);
      if (rec.revision) parts.push(`policy ${shortID(rec.revision)}`);
      return parts.join(' · ');
    }
    case 'rotate': {
      const parts = [`continues ${rec.prev_file ?? '?'}`];
      if (rec.reason) parts.push(rec.reason);
      if (rec.pruned?.length) parts.push(`removed by retention: ${rec.pruned.join(', ')}`);
      return parts.join(' · ');
    }
    default:
      return rec.reason ?? '';
  }
}

/** codeCall is the details of a nested call: its run and number, sizes, duration, and its error or reason. */
export function codeCall(rec) {
  const parts = [`run ${rec.run_id ?? '?'} call ${rec.call_seq ?? '?'}`, `args ${bytes(rec.arguments_bytes ?? 0)}`];
  if (rec.result_sha256) parts.push(`result ${bytes(rec.result_bytes ?? 0)}${rec.result_is_error ? ' (isError)' : ''}`);
  parts.push(`${rec.duration_ms ?? 0} ms`);
  if (rec.approval) parts.push(`asked: ${rec.approval.by} ${rec.approval.decision} after ${rec.approval.wait_ms ?? 0} ms`);
  if (rec.error_kind && rec.error) parts.push(`${rec.error_kind}: ${rec.error}`);
  if (rec.reason && rec.decision !== 'allow') parts.push(rec.reason);
  return parts.join(' · ');
}

/** isRequest: an intercepted request's line (or the one counting a run's omitted requests), which stands under its run as a nested call does. */
export function isRequest(rec) {
  return rec.kind === 'egress' && (rec.intercepted === true || (rec.omitted_requests ?? 0) > 0);
}

/** requestTarget is "METHOD host/path" (the port when not 443), as gatekeeper tail prints it (gate/console/format.go, RequestTarget). */
export function requestTarget(rec) {
  const host = rec.port && rec.port !== 443 ? `${rec.host}:${rec.port}` : rec.host ?? '';
  return rec.method ? `${rec.method} ${host}${rec.path ?? ''}` : host;
}

/** request is the details of an intercepted request: its run, status, proto, secrets by name, bytes, duration, and its error or reason (format.go, requestText). */
export function request(rec) {
  const parts = [`run ${rec.run_id ?? '?'}`];
  if ((rec.omitted_requests ?? 0) > 0) return [...parts, `${rec.omitted_requests} more requests without a line of their own`].join(' · ');
  parts.push(rec.status ? `→ ${rec.status}` : '→ no response');
  if (rec.proto) parts.push(rec.proto);
  if (rec.secrets?.length) parts.push(`secrets ${rec.secrets.join(', ')}`);
  parts.push(`↑${bytes(rec.bytes_up ?? 0)} ↓${bytes(rec.bytes_down ?? 0)}`, `${rec.duration_ms ?? 0} ms`);
  if (rec.error) parts.push(rec.error);
  if (rec.reason && rec.decision !== 'allow') parts.push(rec.reason);
  return parts.join(' · ');
}

export const COLUMNS = ['Time', 'Seq', 'Result', 'Kind', 'Event', 'Tool', 'Rule', 'Query', 'Details'];

/** row renders one record; a click opens its full audit line below it. */
export function row(v, rec) {
  const nested = rec.kind === 'code_call' || isRequest(rec);
  const tool = rec.kind === 'code_call' ? `${rec.server ?? ''}.${rec.tool ?? ''}` : isRequest(rec) ? requestTarget(rec) : rec.tool ?? '';
  const tr = h('tr', { class: ['rec', `tone-${v.tone}`, nested ? 'nested' : ''], 'data-seq': rec.seq, 'data-kind': rec.kind, 'data-decision': rec.decision ?? '', tabindex: 0 },
    h('td', { class: 'time' }, time(rec.time)),
    h('td', { class: 'seq' }, `#${rec.seq}`),
    h('td', { class: 'result' }, verdict(v)),
    h('td', { class: 'kind' }, nested ? `↳ ${rec.kind}` : rec.kind),
    h('td', { class: 'event' }, rec.event ?? ''),
    h('td', { class: 'tool', title: tool }, tool),
    h('td', { class: 'rule', title: rec.rule ?? '' }, rec.rule ?? ''),
    h('td', { class: 'query' }, rec.query_id ? h('a', { href: `#/query/${encodeURIComponent(rec.query_id)}`, title: rec.query_id }, shortID(rec.query_id)) : ''),
    h('td', { class: 'details' }, (rec.kind === 'run' || nested) && rec.run_id ? h('a', { href: `#/run/${encodeURIComponent(rec.run_id)}`, class: 'open-run' }, 'run ▸') : '', ' ', details(rec)),
  );
  const toggle = (e) => {
    if (e.target instanceof Element && e.target.closest('a')) return;
    const next = tr.nextElementSibling;
    if (next?.classList.contains('line')) {
      next.remove();
      return;
    }
    tr.after(h('tr', { class: 'line' }, h('td', { colspan: COLUMNS.length }, auditLine(rec))));
  };
  tr.addEventListener('click', toggle);
  tr.addEventListener('keydown', (e) => {
    if (e.key === 'Enter') toggle(e);
  });
  return tr;
}

/** auditLine shows a record as the audit log holds it, with links to its run and query. */
export function auditLine(rec) {
  return h('div', { class: 'audit-line' },
    h('div', { class: 'links' },
      `audit line #${rec.seq}`,
      rec.run_id ? [' · ', h('a', { href: `#/run/${encodeURIComponent(rec.run_id)}` }, `run ${rec.run_id}`)] : '',
      rec.query_id ? [' · ', h('a', { href: `#/query/${encodeURIComponent(rec.query_id)}` }, `query ${rec.query_id}`)] : ''),
    h('pre', { class: 'json' }, pretty(rec)));
}

/** table makes an empty records table; rows go in its tbody. */
export function table() {
  const tbody = h('tbody');
  const t = h('table', { class: 'records' }, h('thead', {}, h('tr', {}, COLUMNS.map((c) => h('th', { scope: 'col' }, c)))), tbody);
  return { table: t, tbody };
}
