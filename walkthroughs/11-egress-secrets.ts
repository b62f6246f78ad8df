// Walkthrough 11: a credential code can use but never read, and HTTP
// requests decided one by one. The operator's policy declares a secret,
// records_api, read by the sidecar from its own environment and allowed to
// go only to the records API, in its Authorization header. The model's code
// sees a sentinel in RECORDS_API_TOKEN and calls the API with it: the egress
// proxy terminates the TLS (with the sidecar's CA, which the sandbox
// trusts), asks the policy about the request, swaps the sentinel for the
// real token, and scrubs it from the API's echo. A DELETE is refused by the
// operator's Rego rule, the sentinel sent to another host is refused, and a
// key of the code's own is refused because the secret is required. The
// real token appears nowhere the model, the code or the audit log can see.

import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { expectRan, probeLines, runAgent, RUN, type Outcome } from './lib/agent.js';
import { makeCA, startHTTPS } from './lib/tls.js';
import { Transcript } from './lib/transcript.js';
import { auditLines, readAudit, startWorld, verifyAudit, type AuditRecord } from './lib/world.js';

const t = new Transcript(11, 'Secrets code uses but never reads');
t.header(
  'The policy names a secret, where it may go and where in a request. The sandbox sees only a sentinel;',
  'the egress proxy swaps in the real value after the policy allowed the request, for that host only.',
  'Every intercepted request is one Rego decision (event http_request) and one audit line.',
);

const token = `rk_live_wt11_${randomBytes(12).toString('hex')}`;
const caDir = mkdtempSync(join(tmpdir(), 'gk-wt11-ca-'));
const ca = makeCA(caDir);
const api = await startHTTPS(ca, '127.0.0.4', (req, _body, res) => {
  if (req.headers.authorization !== `Bearer ${token}`) {
    res.writeHead(401, { 'content-type': 'application/json' });
    res.end(JSON.stringify({ error: 'bad token', got: req.headers.authorization ?? '' }));
    return;
  }
  res.writeHead(200, { 'content-type': 'application/json' });
  // The API echoes the credential it was sent, as many do in errors and
  // debug fields: the proxy must scrub it on the way back.
  res.end(JSON.stringify({ records: [{ id: 7, name: 'crm-7' }], authorized_as: req.headers.authorization }));
});
const other = await startHTTPS(ca, '127.0.0.5', (_req, _body, res) => {
  res.writeHead(200, { 'content-type': 'text/plain' });
  res.end('the other host');
});

const readOnly = `package gatekeeper

# The records API is read-only for agents: GET and HEAD only.
deny contains {"rule": "team.records_read_only", "reason": sprintf("%s is not allowed on the records API: it is read-only for agents", [input.http.method])} if {
	input.event == "http_request"
	input.http.host == "127.0.0.4"
	not input.http.method in {"GET", "HEAD"}
}
`;

const w = await startWorld({
  n: 11,
  env: { RECORDS_API_TOKEN: token },
  serveArgs: ['--egress-upstream-ca', ca.certFile],
  rego: { 'records.rego': readOnly },
  policy: {
    netEnabled: true,
    netAllow: [api.hostPort, other.hostPort],
    netInspect: [other.hostPort],
    netSecrets: ['records_api'],
    secrets: {
      records_api: {
        from_env: 'RECORDS_API_TOKEN',
        hosts: [api.hostPort],
        inject: { header: 'Authorization' },
        sentinel: { env: 'RECORDS_API_TOKEN' },
        require: true,
      },
    },
  },
});

/** call is Python that sends one request through the proxy and prints "label status body". */
function call(label: string, method: string, url: string, auth: string): string {
  return `import json, os, urllib.request, urllib.error
tok = os.environ.get("RECORDS_API_TOKEN", "")
print("holds", tok[:11] + "…" if tok else "nothing")
req = urllib.request.Request(${JSON.stringify(url)}, method=${JSON.stringify(method)}, headers={"Authorization": ${auth}})
try:
    with urllib.request.urlopen(req, timeout=15) as r:
        print(${JSON.stringify(label)}, r.status, r.read().decode())
except urllib.error.HTTPError as e:
    print(${JSON.stringify(label)}, e.code, e.read().decode().strip())
`;
}

/** lines are the run's intercepted-request audit lines. */
const lines = (o: Outcome): AuditRecord[] => o.egress.filter((e) => e.method !== undefined && e.method !== 'CONNECT');

try {
  t.line('sidecar', `gatekeeper serve (pid ${String(w.pid)}); secret records_api from the sidecar's env, to ${api.hostPort} in Authorization; ${other.hostPort} inspected`);
  t.line('upstream', `the records API https://${api.hostPort}/ (it wants the real token) and another allowlisted host https://${other.hostPort}/`);

  t.section('The code calls the API with the sentinel it holds');
  const run = await runAgent(w, t, [
    {
      say: 'the model\'s code reads RECORDS_API_TOKEN and GETs /v1/records with it',
      call: { name: RUN, input: { language: 'python', code: call('get', 'GET', `https://${api.hostPort}/v1/records`, '"Bearer " + tok') } },
      check: (o, t) => {
        const r = expectRan(t, o);
        const out = probeLines(r?.stdout ?? '');
        t.expect((out.get('holds') ?? '').startsWith('gksentinel_'), 'the code holds a sentinel, not the token', r?.stdout);
        t.expect((out.get('get') ?? '').startsWith('200 '), 'the API answered 200: the proxy swapped the sentinel for the real token', r?.stdout);
        t.expect(api.seen.at(-1)?.authorization === `Bearer ${token}`, 'the API received the real token in Authorization', api.seen.at(-1)?.authorization.replace(token, '<token>'));
        t.expect(!(r?.stdout ?? '').includes(token) && /"authorized_as":"Bearer gksentinel_/.test(r?.stdout ?? ''),
          'the API\'s echo of the credential came back scrubbed: the code reads the sentinel there', r?.stdout);
        const l = lines(o);
        t.expect(l.length === 1 && l[0]?.decision === 'allow' && l[0].method === 'GET' && l[0].path === '/v1/records' && l[0].status === 200 && JSON.stringify(l[0].secrets) === '["records_api"]',
          'one audit line: allow GET /v1/records → 200, secret records_api injected (by name)', JSON.stringify(l));
      },
    },
    {
      say: 'the model\'s code tries to DELETE a record',
      call: { name: RUN, input: { language: 'python', code: call('delete', 'DELETE', `https://${api.hostPort}/v1/records/7`, '"Bearer " + tok') } },
      check: (o, t) => {
        const r = expectRan(t, o);
        const got = probeLines(r?.stdout ?? '').get('delete') ?? '';
        t.expect(got.startsWith('403 ') && got.includes('team.records_read_only') && got.includes('read-only for agents'),
          'the DELETE was refused 403, and the body names the rule and its reason for the model', got);
        t.expect(!api.seen.some((s) => s.method === 'DELETE'), 'the API never saw a DELETE');
        const l = lines(o);
        t.expect(l.length === 1 && l[0]?.decision === 'deny' && l[0].rule === 'team.records_read_only' && l[0].method === 'DELETE',
          'its audit line: deny DELETE, rule team.records_read_only', JSON.stringify(l));
      },
    },
    {
      say: 'the model\'s code sends the sentinel to another allowlisted host',
      call: { name: RUN, input: { language: 'python', code: call('other', 'GET', `https://${other.hostPort}/collect`, '"Bearer " + tok') } },
      check: (o, t) => {
        const r = expectRan(t, o);
        const got = probeLines(r?.stdout ?? '').get('other') ?? '';
        t.expect(got.startsWith('403 ') && got.includes('egress.secret_wrong_host'), 'refused 403: egress.secret_wrong_host', got);
        t.expect(other.seen.length === 0, 'the other host got no request');
        t.expect(lines(o).some((e) => e.rule === 'egress.secret_wrong_host' && e.decision === 'deny'), 'the refusal is audited with its rule', JSON.stringify(o.egress));
      },
    },
    {
      say: 'the model\'s code brings a key of its own',
      call: { name: RUN, input: { language: 'python', code: call('own', 'GET', `https://${api.hostPort}/v1/records`, '"Bearer my-own-key"') } },
      check: (o, t) => {
        const r = expectRan(t, o);
        const got = probeLines(r?.stdout ?? '').get('own') ?? '';
        t.expect(got.startsWith('403 ') && got.includes('egress.secret_required'), 'refused 403: egress.secret_required (the secret is required for this host)', got);
        t.expect(lines(o).some((e) => e.rule === 'egress.secret_required'), 'the refusal is audited with its rule', JSON.stringify(o.egress));
      },
    },
  ], {
    tag: 'secrets',
    prompt: 'List the records, then delete record 7.',
    finalText: () => 'The API is read-only for me: I listed the records but could not delete one.',
  });

  t.section('Afterwards: the token appears nowhere the model, the code or the logs can see');
  const outputs = run.outcomes.map((o) => `${o.sandbox?.stdout ?? ''}${o.sandbox?.stderr ?? ''}${o.result?.text ?? ''}`).join('\n');
  t.expect(!outputs.includes(token), 'no run\'s output or tool result holds the token');
  t.expect(!JSON.stringify(run.fake.requests.map((q) => q.body)).includes(token), 'no request to the model holds it');
  const auditText = auditLines(w.auditLog).join('\n');
  t.expect(!auditText.includes(token), 'the audit log never holds it');
  t.expect(!w.log().includes(token), 'the sidecar\'s own log never holds it');
  const records = readAudit(w.auditLog).length;
  const v = verifyAudit(w.auditLog);
  t.line('verify', [`gatekeeper audit verify ${w.auditLog} → exit ${String(v.code)}`, ...v.lines.map((l) => `  ${l}`)].join('\n'));
  t.expect(v.code === 0 && v.lines.at(-1) === `ok: 1 file, ${String(records)} lines, seq 1-${String(records)}, chain intact`, 'gatekeeper audit verify: the hash chain holds', v.lines.join('\n'));
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  await w.stop();
  await api.close();
  await other.close();
  rmSync(caDir, { recursive: true, force: true });
}
process.exit(t.finish());
