// stream.js: the live stream, newest first, with filters, a search box and
// pause/resume. Filtering is the server's: a change of filter opens a new
// stream, which starts with the matching history.
import { filterParams, parseEvent } from './api.js';
import { clear, h } from './dom.js';
import { pendingPanel } from './pending.js';
import { row, table } from './rows.js';

const MAX_ROWS = 2000;

export function streamView(root, params, setConn) {
  const filter = { kind: params.get('kind') ?? '', decision: params.get('decision') ?? '', rule: params.get('rule') ?? '', tool: params.get('tool') ?? '', query: params.get('query') ?? '', q: params.get('q') ?? '' };
  const rules = h('datalist', { id: 'rules-seen' });
  const tools = h('datalist', { id: 'tools-seen' });
  const seen = { rules: new Set(), tools: new Set() };
  const select = (name, label, options) => h('label', {}, label, ' ',
    h('select', { name, 'aria-label': label, onchange: (e) => set(name, e.target.value) },
      options.map(([v, text]) => h('option', { value: v, selected: filter[name] === v }, text))));
  const text = (name, label, list) => h('label', {}, label, ' ',
    h('input', { name, type: 'search', value: filter[name], list, 'aria-label': label, placeholder: label === 'Search' ? 'text in any field' : 'any', oninput: (e) => setSoon(name, e.target.value) }));
  const pauseBtn = h('button', { type: 'button', id: 'pause', onclick: () => (paused ? resume() : pause()) }, 'Pause');
  const count = h('span', { class: 'count', id: 'count' }, '');
  const note = h('div', { class: 'note', id: 'stream-note' });
  const pending = pendingPanel();
  const { table: t, tbody } = table();
  const empty = h('p', { class: 'empty' }, 'No records match yet.');
  clear(root).append(
    h('div', { class: 'filters', role: 'search' },
      select('kind', 'Kind', [['', 'all'], ['decision', 'decision'], ['run', 'run'], ['query', 'query'], ['code_call', 'code call'], ['egress', 'egress'], ['rotate', 'rotate']]),
      select('decision', 'Decision', [['', 'all'], ['allow', '✔ allow'], ['deny', '✘ deny'], ['ask', '? ask']]),
      text('rule', 'Rule', 'rules-seen'), text('tool', 'Tool', 'tools-seen'), text('query', 'Query'), text('q', 'Search'),
      pauseBtn, count, rules, tools),
    note, pending.panel, t, empty);

  let es;
  let paused = false;
  let held = [];
  let shown = 0;
  const timers = new Map(); // a pending filter change per field

  const learn = (rec) => {
    for (const [set, v, list] of [[seen.rules, rec.rule, rules], [seen.tools, rec.tool, tools]]) {
      if (v && !set.has(v)) {
        set.add(v);
        list.append(h('option', { value: v }));
      }
    }
  };
  let lastSeq = 0;
  const show = (items) => {
    // items oldest first; newest goes on top. A resumed stream may repeat
    // what was shown: seq only grows.
    for (const { v, rec } of items) {
      if (rec.seq <= lastSeq) continue;
      lastSeq = rec.seq;
      tbody.prepend(row(v, rec));
      shown++;
    }
    while (tbody.rows.length > MAX_ROWS) tbody.lastElementChild.remove();
    empty.hidden = shown > 0;
    count.textContent = paused ? `paused · ${held.length} new` : `${shown} shown`;
  };
  const add = (item) => {
    learn(item.rec);
    if (paused) {
      if (item.rec.seq > (held.at(-1)?.rec.seq ?? lastSeq)) held.push(item);
      count.textContent = `paused · ${held.length} new`;
    } else show([item]);
  };
  function pause() {
    paused = true;
    pauseBtn.textContent = 'Resume';
    pauseBtn.setAttribute('aria-pressed', 'true');
    count.textContent = `paused · ${held.length} new`;
  }
  function resume() {
    paused = false;
    pauseBtn.textContent = 'Pause';
    pauseBtn.setAttribute('aria-pressed', 'false');
    const items = held;
    held = [];
    show(items);
  }
  function connect() {
    es?.close();
    clear(tbody);
    shown = 0;
    lastSeq = 0;
    held = [];
    const p = filterParams(filter);
    p.set('limit', '1000');
    history.replaceState(null, '', `#/stream${p.toString() ? `?${filterParams(filter)}` : ''}`);
    es = new EventSource(`/ui/api/stream?${p}`);
    setConn('connecting', '… connecting');
    const backfill = [];
    let ready = false;
    es.addEventListener('record', (e) => {
      const item = parseEvent(JSON.parse(e.data));
      if (ready) add(item);
      else backfill.push(item);
    });
    es.addEventListener('ready', (e) => {
      const info = JSON.parse(e.data);
      ready = true;
      backfill.forEach((i) => learn(i.rec));
      show(backfill.splice(0));
      note.textContent = info.gap ? 'Some records between the last one seen and the console\'s history were missed.' : '';
      setConn('live', '● live');
    });
    es.addEventListener('pending', (e) => pending.update(e.data));
    es.addEventListener('lagged', () => setConn('connecting', '… catching up'));
    es.addEventListener('logout', () => location.reload());
    es.onerror = () => setConn('down', '○ reconnecting');
    es.onopen = () => {
      ready = false;
    };
  }
  function set(name, value) {
    filter[name] = value.trim();
    connect();
  }
  function setSoon(name, value) {
    clearTimeout(timers.get(name));
    timers.set(name, setTimeout(() => {
      timers.delete(name);
      set(name, value);
    }, 300));
  }
  connect();
  return () => {
    for (const t of timers.values()) clearTimeout(t);
    pending.stop();
    es?.close();
  };
}
