// query.js: one agent query: its calls in order, its session (when it had
// one), its override and its effective policy.
import { getJSON } from './api.js';
import { bytes, clear, h, pretty, time } from './dom.js';
import { row, table } from './rows.js';

/** duration renders milliseconds as 1h 2m, 3m 4s or 5.6 s. */
function duration(ms) {
  const s = Math.floor(ms / 1000);
  if (s >= 3600) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  if (s >= 60) return `${Math.floor(s / 60)}m ${s % 60}s`;
  return `${(ms / 1000).toFixed(1)} s`;
}

/** sessionCard shows the query's latest session (the API's SessionView): its age, idle time, memory and restarts. */
function sessionCard(s) {
  const pairs = [
    ['session', h('code', {}, s.session_id)],
    ['state', s.open ? 'open' : `ended: ${s.ended}`],
    ['sandbox', s.sandbox ? h('code', {}, s.sandbox) : ''],
    ['started', s.started ? time(s.started) : ''],
    ['age', s.started ? duration(s.age_ms) : 'unknown (its start is older than the history)'],
    ['idle', s.open ? duration(s.idle_ms) : ''],
    ['runs', String(s.runs)],
    ['memory', s.peak_memory_bytes > 0 ? `peak ${bytes(s.peak_memory_bytes)}` : 'unknown'],
    ['restarts', s.restarts > 0 ? `${s.restarts} (each lost the session's state)` : '0'],
  ].filter(([, v]) => v !== '');
  return h('section', { class: 'card', id: 'session' }, h('h2', {}, 'Session'),
    h('dl', { class: 'kv' }, pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)])));
}

export async function queryView(root, id) {
  clear(root).append(h('p', { class: 'dim' }, 'Loading…'));
  const q = await getJSON(`/ui/api/queries/${encodeURIComponent(id)}`);
  const { table: t, tbody } = table();
  for (const e of q.records) tbody.append(row(e.v, e.line));
  const eff = q.effective;
  clear(root).append(
    h('h1', {}, 'Query ', h('code', {}, id)),
    h('p', {}, h('a', { href: `#/stream?query=${encodeURIComponent(id)}` }, '◂ stream of this query'), ` · ${q.records.length} records, oldest first`),
    q.note ? h('p', { class: 'note' }, q.note) : '',
    q.session ? sessionCard(q.session) : '',
    h('section', { class: 'card' }, h('h2', {}, 'Calls in order'), t),
    h('div', { class: 'cols' },
      h('section', { class: 'card' }, h('h2', {}, 'Override'), q.override === undefined || q.override === null ? h('p', { class: 'empty' }, 'none: the operator\'s policy as it is') : h('pre', { class: 'json' }, pretty(q.override))),
      eff ? h('section', { class: 'card' }, h('h2', {}, 'Effective policy'),
        eff.error ? h('p', { class: 'error' }, eff.error) : [
          h('p', { class: 'dim' }, eff.exact ? `${eff.hash}: the policy the query was opened with` : `computed under the current revision; the query was opened with ${eff.opened_with}, which differs (the policy was reloaded since)`),
          h('pre', { class: 'json' }, pretty(eff.policy)),
        ]) : ''),
  );
}
