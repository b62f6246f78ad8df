// overview.js: the sidecar at a glance, from the same registry /metrics
// serves: decisions per second and by result, the decision latency
// histogram, runs by outcome, the warm pool; the policy revision and its
// reload history; the runner; and whether the audit chain verifies.
import { getJSON } from './api.js';
import { bytes, clear, h, time } from './dom.js';
import { bars, columns, fmt, spark } from './charts.js';

const TONE = { allow: 'allow', deny: 'deny', ask: 'ask' };
const RUN_TONE = { exited: 'allow', timed_out: 'warn', oom_killed: 'warn', cancelled: 'warn', runner_unavailable: 'deny', error: 'deny' };

function family(m, name) {
  return m.find((f) => f.name === name)?.metrics ?? [];
}
function total(m, name) {
  return family(m, name).reduce((a, x) => a + x.value, 0);
}
function card(title, ...body) {
  return h('section', { class: 'card' }, h('h2', {}, title), body);
}
function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}
function short(rev) {
  return rev ? rev.replace(/^sha256:/, '').slice(0, 12) : '—';
}

function latency(m) {
  const hist = family(m, 'gatekeeper_decision_duration_seconds')[0];
  if (!hist) return [];
  let prev = 0;
  const out = hist.buckets.map((b) => {
    const n = b.count - prev;
    prev = b.count;
    return { label: b.le < 1e-3 ? `${b.le * 1e6}µs` : b.le < 1 ? `${b.le * 1e3}ms` : `${b.le}s`, value: n };
  });
  out.push({ label: '>1s', value: hist.count - prev });
  return out;
}

function chain(c) {
  const state = c.state === 'ok' ? '✔ verifies' : c.state === 'broken' ? '✘ broken' : '… reading';
  const tone = c.state === 'ok' ? 'allow' : c.state === 'broken' ? 'deny' : 'info';
  const from = c.first_seq > 1 ? ' (the console\'s history starts there; gatekeeper audit verify checks the lines before)' : '';
  const rows = [['state', h('span', { class: ['verdict', `tone-${tone}`], id: 'chain-state' }, state)], ['lines verified', h('span', { id: 'chain-lines' }, String(c.lines))],
    ['seqs', h('span', { id: 'chain-seqs' }, c.lines ? `#${c.first_seq}–#${c.last_seq}${from}` : '—')]];
  if (c.break) rows.push(['break', `${c.break.File ? `${c.break.File} ` : ''}line ${c.break.Line}: ${c.break.Reason}`]);
  if (c.writer_seq) rows.push(['writer head', `seq ${c.writer_seq}${c.head_matches === false ? ' — the file\'s last line is not what the writer wrote' : c.head_matches ? ' — matches the file' : ''}`]);
  if (c.read_error) rows.push(['read error', c.read_error]);
  return kv(rows);
}

export function overviewView(root) {
  const samples = []; // {t, n}: total decisions over time
  let timer;
  let stopped = false;
  const draw = (o) => {
    const m = o.metrics ?? [];
    const now = Date.now();
    const n = total(m, 'gatekeeper_decisions_total');
    samples.push({ t: now, n });
    while (samples.length > 61) samples.shift();
    const rates = samples.slice(1).map((p, i) => ((p.n - samples[i].n) * 1000) / Math.max(1, p.t - samples[i].t));
    const byDecision = {};
    const byRule = {};
    for (const x of family(m, 'gatekeeper_decisions_total')) {
      byDecision[x.labels.decision] = (byDecision[x.labels.decision] ?? 0) + x.value;
      byRule[x.labels.rule] = (byRule[x.labels.rule] ?? 0) + x.value;
    }
    const rules = Object.entries(byRule).sort((a, b) => b[1] - a[1]).slice(0, 8);
    const runs = family(m, 'gatekeeper_runs_total').map((x) => ({ label: x.labels.outcome, value: x.value, tone: RUN_TONE[x.labels.outcome] ?? 'info' }));
    const pool = (name) => fmt(total(m, name));
    const r = o.runner;
    clear(root).append(
      h('h1', {}, 'Overview'),
      h('div', { class: 'grid' },
        card('Decisions',
          h('p', { class: 'big', id: 'decision-total' }, `${fmt(n)} decided · ${fmt(rates.at(-1) ?? 0)}/s now`),
          spark(rates, 'decisions per second, last two minutes'),
          bars(['allow', 'deny', 'ask'].map((d) => ({ label: `${{ allow: '✔', deny: '✘', ask: '?' }[d]} ${d}`, value: byDecision[d] ?? 0, tone: TONE[d] })))),
        card('Decision latency', columns(latency(m), 'decisions by time to decide (from gatekeeper_decision_duration_seconds)')),
        card('Runs by outcome', bars(runs)),
        card('Top rules', bars(rules.map(([k, v]) => ({ label: k, value: v })))),
        card('Policy',
          kv([['revision', h('code', { title: o.revision }, short(o.revision))], ['sidecar', `gatekeeper ${o.version}, up since ${new Date(o.started).toLocaleString()}`]]),
          h('h3', {}, 'Reload history'),
          h('table', { class: 'reloads' }, h('thead', {}, h('tr', {}, h('th', {}, 'time'), h('th', {}, 'result'), h('th', {}, 'revision'), h('th', {}, 'why'))),
            h('tbody', {}, o.reloads.slice().reverse().map((ev, i, all) => h('tr', { class: ev.error ? 'tone-deny' : 'tone-allow' },
              h('td', {}, time(ev.time)),
              h('td', {}, ev.error ? h('span', { class: 'verdict tone-deny' }, '✘ refused') : h('span', { class: 'verdict tone-allow' }, i === all.length - 1 ? '✔ loaded' : '✔ reloaded')),
              h('td', {}, h('code', { title: ev.revision }, short(ev.revision))),
              h('td', { class: 'why' }, ev.error || (ev.previous ? `was ${short(ev.previous)}` : 'first load'))))))),
        card('Audit chain', h('p', { class: 'dim' }, o.audit_log), chain(o.chain)),
        card('Sandbox runner', r ? kv([['backend', r.backend], ['engine', r.engine || '—'], ['runtimes', (r.runtimes ?? []).join(', ') || '—'], ['default image', r.default_image || '—'], ['instance', r.instance || '—'], ...(r.error ? [['status', h('span', { class: 'verdict tone-deny' }, `✘ ${r.error}`)]] : [['status', h('span', { class: 'verdict tone-allow' }, '✔ engine answers')]])]) : h('p', { class: 'empty' }, 'no runner: runs answer runner_unavailable'),
          h('h3', {}, 'Warm pool'),
          kv([['warm containers', pool('gatekeeper_pool_warm_containers')], ['hits', pool('gatekeeper_pool_hits_total')], ['misses', pool('gatekeeper_pool_misses_total')], ['refill errors', pool('gatekeeper_pool_refill_errors_total')]])),
        card('Console', kv([
          ['connections', fmt(total(m, 'gatekeeper_connections_open'))],
          ['history held', `${o.history.records} records (#${o.history.first_seq}–#${o.history.last_seq}), ${bytes(o.history.bytes)} of ${bytes(o.history.max_bytes)}`],
          ['runs held', `${o.runs_held.runs} of ${o.runs_held.max_runs}, ${bytes(o.runs_held.bytes)} of ${bytes(o.runs_held.max_bytes)}`],
          ['live streams', String(o.history.subscribers)],
        ])),
      ),
    );
  };
  const tick = async () => {
    try {
      draw(await getJSON('/ui/api/overview'));
    } catch (e) {
      if (e.status === 401) location.reload();
    }
    if (!stopped) timer = setTimeout(tick, 2000);
  };
  tick();
  return () => {
    stopped = true;
    clearTimeout(timer);
  };
}
