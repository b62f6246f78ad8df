// pending.js: the nested calls that wait for a human's approval now, from
// the stream's `pending` events (the whole set each time). A call leaves
// the list when its wait ends; its code_call line, with the answer, then
// comes on the stream.
import { clear, h, shortID } from './dom.js';

/** waited formats milliseconds as "3 s" or "2 min 5 s". */
function waited(ms) {
  const s = Math.floor(ms / 1000);
  return s < 60 ? `${s} s` : `${Math.floor(s / 60)} min ${s % 60} s`;
}

/** pendingPanel returns the panel and a function that takes an event's data. */
export function pendingPanel() {
  const list = h('ul', { class: 'pending-list' });
  const panel = h('section', { id: 'pending', class: 'pending', hidden: true, 'aria-live': 'polite' },
    h('h2', {}, 'Waiting for approval'), list);
  let items = [];
  let got = 0; // when the set came, by this page's clock
  const draw = () => {
    clear(list);
    for (const p of items) {
      const ms = p.waited_ms + (Date.now() - got);
      list.append(h('li', { class: 'pending-call', 'data-id': p.id },
        h('span', { class: 'verdict tone-ask' }, '? WAITING'), ' ',
        h('strong', { class: 'pending-tool' }, `${p.server}.${p.tool}`), ' · ',
        h('a', { href: `#/run/${encodeURIComponent(p.run_id)}`, title: p.run_id }, `run ${p.run_id}`), ` call ${p.call_seq} · `,
        h('a', { href: `#/query/${encodeURIComponent(p.query_id)}`, title: p.query_id }, `query ${shortID(p.query_id)}`), ' · ',
        h('span', { class: 'pending-waited' }, `waiting ${waited(ms)} of ${waited(p.timeout_ms)}`), ' · ',
        h('span', { class: 'pending-rule' }, p.rule), ': ', h('span', { class: 'pending-reason' }, p.reason)));
    }
    panel.hidden = items.length === 0;
  };
  const timer = setInterval(() => items.length > 0 && draw(), 1000);
  return {
    panel,
    update(data) {
      items = JSON.parse(data).pending ?? [];
      got = Date.now();
      draw();
    },
    stop: () => clearInterval(timer),
  };
}
