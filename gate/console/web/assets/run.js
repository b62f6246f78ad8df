// run.js: one sandboxed run: how it ended, its code and input files, its
// output as the model got it, its effective sandbox policy, the files it
// returned, and its audit lines.
import { getJSON } from './api.js';
import { bytes, clear, h, pretty, verdict } from './dom.js';
import { auditLine, codeCall, isRequest, request, requestTarget } from './rows.js';

function section(title, ...body) {
  return h('section', { class: 'card' }, h('h2', {}, title), body);
}

function kv(pairs) {
  return h('dl', { class: 'kv' }, pairs.filter(([, v]) => v !== undefined && v !== '').map(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]));
}

function output(name, text, cap, truncated) {
  return section(name,
    h('p', { class: 'dim' }, `${bytes(text.length)}${cap ? ` of at most ${bytes(cap)}` : ''}${truncated ? ' · the run hit the cap: output beyond it was discarded' : ''}`),
    text === '' ? h('p', { class: 'empty' }, '(empty)') : h('pre', { class: ['output', name.toLowerCase()] }, text));
}

export async function runView(root, id) {
  clear(root).append(h('p', { class: 'dim' }, 'Loading…'));
  const r = await getJSON(`/ui/api/runs/${encodeURIComponent(id)}`);
  const events = r.records.map((e) => ({ v: e.v, rec: e.line }));
  const runEv = events.find((e) => e.rec.kind === 'run');
  const decide = events.find((e) => e.rec.kind === 'decision' && e.rec.decision === 'allow') ?? events.find((e) => e.rec.kind === 'decision');
  const rec = runEv?.rec ?? {};
  const d = r.detail;
  const code = d?.code ?? decide?.rec.tool_input?.code;
  const files = d?.files ?? Object.fromEntries(Object.entries(decide?.rec.tool_input?.files ?? {}).map(([k, v]) => [k, typeof v === 'string' ? v.length : v]));
  const result = d?.result ?? {};
  const returned = result.Files ?? result.files;
  const calls = events.filter((e) => e.rec.kind === 'code_call');
  const requests = events.filter((e) => isRequest(e.rec));

  clear(root).append(
    h('h1', {}, 'Run ', h('code', {}, id), ' ', runEv ? verdict(runEv.v) : ''),
    h('p', {}, h('a', { href: '#/stream' }, '◂ stream'), r.query_id ? [' · ', h('a', { href: `#/query/${encodeURIComponent(r.query_id)}` }, `query ${r.query_id}`)] : ''),
    r.held ? '' : h('p', { class: 'note', id: 'run-evicted' },
      `The console no longer holds this run's output: it keeps the last ${r.store.max_runs} runs (at most ${bytes(r.store.max_bytes)}) in memory, and the audit log records sizes, not output. `,
      'What is shown comes from the audit log: the code from the decision line, the outcome from the run line.'),
    section('Outcome', kv([
      ['outcome', rec.outcome ?? (rec.decision === 'deny' ? 'refused' : '')], ['exit code', rec.exit_code], ['duration', rec.duration_ms !== undefined ? `${rec.duration_ms} ms` : ''],
      ['peak memory', rec.peak_memory_bytes ? bytes(rec.peak_memory_bytes) : rec.outcome && rec.outcome !== 'error' ? 'unknown (the runner saw no figure)' : ''], ['runtime', rec.runtime], ['image', rec.image],
      ['stdout / stderr', rec.stdout_bytes !== undefined || rec.stderr_bytes !== undefined ? `${bytes(rec.stdout_bytes ?? 0)} / ${bytes(rec.stderr_bytes ?? 0)}` : ''],
      ['truncated', rec.truncated ? 'yes' : ''], ['nested calls', rec.tool_calls], ['error', rec.error], ['rule', rec.rule], ['reason', rec.reason],
      ['language', d?.language ?? decide?.rec.tool_input?.language], ['timeout', d ? `${d.timeout_ms} ms` : ''],
    ])),
    section('Code', code === undefined ? h('p', { class: 'empty' }, '(not in the console\'s history)') : h('pre', { class: 'code', id: 'run-code' }, code)),
    section('Input files', Object.keys(files).length === 0 ? h('p', { class: 'empty' }, 'none') :
      h('table', { class: 'files' }, h('thead', {}, h('tr', {}, h('th', {}, 'name'), h('th', {}, 'size'))),
        h('tbody', {}, Object.entries(files).map(([name, size]) => h('tr', {}, h('td', {}, name), h('td', {}, typeof size === 'number' ? bytes(size) : String(size))))))),
    d ? output('Stdout', d.stdout, d.output_cap_bytes, d.truncated) : '',
    d ? output('Stderr', d.stderr, d.output_cap_bytes, d.truncated) : '',
    section('Files returned', returned && Object.keys(returned).length > 0 ? h('pre', { class: 'json' }, pretty(returned)) : h('p', { class: 'empty' }, d ? 'none reported by the runner' : 'unknown (not held)')),
    d ? section('Effective sandbox policy', h('p', { class: 'dim' }, d.policy_hash), h('pre', { class: 'json', id: 'run-policy' }, pretty(d.policy?.sandbox ?? d.policy))) : '',
    section('Nested calls', calls.length === 0 ? h('p', { class: 'empty' }, 'none in the console\'s history') :
      h('table', { class: 'records', id: 'run-calls' }, h('thead', {}, h('tr', {}, ['#', 'Result', 'Tool', 'Rule', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, calls.map((e) => h('tr', { class: ['rec', 'nested', `tone-${e.v.tone}`] },
          h('td', {}, String(e.rec.call_seq ?? '')), h('td', { class: 'result' }, verdict(e.v)), h('td', { class: 'tool' }, `${e.rec.server}.${e.rec.tool}`),
          h('td', { class: 'rule' }, e.rec.rule ?? ''), h('td', { class: 'details' }, codeCall(e.rec))))))),
    section('HTTP requests', requests.length === 0 ? h('p', { class: 'empty' }, 'none intercepted in the console\'s history') :
      h('table', { class: 'records', id: 'run-requests' }, h('thead', {}, h('tr', {}, ['Result', 'Request', 'Rule', 'Details'].map((c) => h('th', { scope: 'col' }, c)))),
        h('tbody', {}, requests.map((e) => h('tr', { class: ['rec', 'nested', `tone-${e.v.tone}`] },
          h('td', { class: 'result' }, verdict(e.v)), h('td', { class: 'tool', title: requestTarget(e.rec) }, requestTarget(e.rec)),
          h('td', { class: 'rule' }, e.rec.rule ?? ''), h('td', { class: 'details' }, request(e.rec))))))),
    section('Audit lines', events.length === 0 ? h('p', { class: 'empty' }, 'none in the console\'s history') : events.map((e) => auditLine(e.rec))),
  );
}
