// The program the Node tests run against the fake bridge: it uses the
// generated wrappers as a sandboxed program would and prints what it saw,
// as one JSON object, for the Go test to check.
'use strict';
const gk = require('gatekeeper-tools');
const records = require('gatekeeper-tools/records');
const evil = require('gatekeeper-tools/evil');
const class_ = require('gatekeeper-tools/class_');
const call_ = require('gatekeeper-tools/call_');
const json_server = require('gatekeeper-tools/json');

async function main() {
  const out = {};
  out.page = await records.get_records({ page: 2, size: 10 });
  out.page_defaults = await records.get_records({ page: 1 });
  out.lookup = await records.lookup({ id: 'c-7' });
  // Files, not base64: each non-text item is written to a file.
  const media = await records.lookup({ id: 'media' });
  out.media = media;
  out.media_bytes = media.map((i) => (i && i.type === 'file' ? require('fs').readFileSync(i.path).toString('hex') : null));
  out.media_call_has_base64 = JSON.stringify(await gk.call('records', 'lookup', { id: 'media' })).includes('iVBORw0KGgo');
  try {
    await records.lookup({ id: 'not-base64' });
    out.not_base64 = null;
  } catch (e) {
    out.not_base64 = e.kind;
  }
  out.count = await records.count();
  out.update = await records.update({ record: { id: 'c-7', fields: { name: 'Ada' } }, tags: ['a', 'b'], dry_run: false });
  out.a_b = JSON.parse(await evil.a_b({ 'not an identifier': 'x', from: 1, _args: 'y', _gk: 'z', 'page-size': 3, page_size: 4, '9lives': '*/ x /*' }));
  out.dict = JSON.parse(await evil.dict({ str: 's' }));
  out.class_ = JSON.parse(await evil.class_({ x: 1 }));
  out.get_records = [JSON.parse(await evil.get_records({ x: 1 })), JSON.parse(await evil.get_records_({ x: 2 }))];
  out.any = JSON.parse(await evil.Any_({ free: 'form', n: 1 }));
  out.constructor = await evil.constructor_();
  out.then = JSON.parse(await evil.then_());
  // A module with a then export would be taken for a promise here.
  out.imported_not_thenable = typeof (await import(require.resolve('gatekeeper-tools/evil'))).a_b === 'function';
  out.modules = [];
  for (const m of [class_, call_, json_server]) out.modules.push(JSON.parse(await m.ping()));
  out.call_is_function = typeof gk.call === 'function';
  out.dir_records = Object.getOwnPropertyNames(records).sort();
  out.dir_package = Object.keys(gk).sort();
  out.servers = gk.servers();

  const errors = {};
  for (const tool of ['x-denied', 'x-limit', 'x-timeout', 'x-server', 'x-cancelled', 'x-bad-request', 'x-novel', 'x-tool-error']) {
    try {
      await gk.call('records', tool, {});
      errors[tool] = null;
    } catch (e) {
      if (!(e instanceof gk.ToolCallError)) throw e;
      errors[tool] = {
        class: e.constructor.name, kind: e.kind, rule: e.rule, message: e.message,
        is_denied: e instanceof gk.ToolCallDenied, is_limit: e instanceof gk.ToolCallLimit,
        has_result: e.result !== undefined,
      };
    }
  }
  out.errors = errors;

  // Calls in flight at once: the bridge answers them only once all are
  // there, in reverse order.
  const n = Number(process.env.BARRIER);
  const calls = [];
  for (let i = 0; i < n; i++) calls.push(gk.call('records', 'barrier', { n: i }).then((r) => r.structuredContent.n));
  out.barrier = await Promise.all(calls);

  const big = (await gk.call('records', 'x-big', {})).content[0].text;
  out.big = /^\u00e9*$/.test(big) ? big.length : -1;

  try {
    await gk.call('records', 'x-close', {});
    out.closed = null;
  } catch (e) {
    out.closed = e.kind;
  }
  out.after_close = await records.lookup({ id: 'again' });
  console.log(JSON.stringify(out));
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
