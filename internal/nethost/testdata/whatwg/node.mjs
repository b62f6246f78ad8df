// Prints what Node's WHATWG URL parser (new URL) makes of every URL in
// urls.json, as TestParseURLAgreesWithNode reads it from node.golden.json.
// Regenerate after changing urls.json:
//
//   node internal/nethost/testdata/whatwg/node.mjs > internal/nethost/testdata/whatwg/node.golden.json
//
// "fetch" is what Claude Code's WebFetch does before fetching: it sets the
// protocol of an http: URL to https: (url.protocol = "https:").
import { readFileSync } from 'node:fs';

const cases = JSON.parse(readFileSync(new URL('./urls.json', import.meta.url), 'utf8'));
const out = cases.map(({ url }) => {
  let u;
  try {
    u = new URL(url);
  } catch {
    return { url, ok: false };
  }
  const r = { url, ok: true, protocol: u.protocol, hostname: u.hostname, port: u.port, username: u.username, password: u.password };
  if (u.protocol === 'http:' || u.protocol === 'https:') {
    const f = new URL(u.href);
    if (f.protocol === 'http:') f.protocol = 'https:';
    r.fetch = { protocol: f.protocol, hostname: f.hostname, port: f.port };
  }
  return r;
});
process.stdout.write('[\n' + out.map((r) => ' ' + JSON.stringify(r).replace(/[\u007f-\uffff]/g, (c) => '\\u' + c.charCodeAt(0).toString(16).padStart(4, '0'))).join(',\n') + '\n]\n');
