// query.js: one agent query: its calls in order, its override and its
// effective policy.
import { getJSON } from './api.js';
import { clear, h, pretty } from './dom.js';
import { row, table } from './rows.js';

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
