// The live console, tested in a real browser: the real sidecar with --ui
// on loopback, a real Agent SDK query through @gatekeeper/client (and a
// raw protocol client for what Claude Code would never send, such as a
// tool named like HTML), then headless Chromium (Debian's package, driven
// over CDP by puppeteer-core) logging in and checking each view, and
// `gatekeeper tail` against the same traffic. Any console error or page
// error in a console page fails the test. Screenshots go to
// $CONSOLE_OUT (default walkthroughs/build/console-out); with
// CONSOLE_SCREENSHOT=FILE the overview's is also copied there.
//
//   npm run console              (UPDATE_GOLDEN=1 rewrites console/tail.golden; refused under CI=true)

import { execFileSync, spawn } from 'node:child_process';
import { copyFileSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createServer, request, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import puppeteer, { type Browser, type Page } from 'puppeteer-core';
import WebSocket from 'ws';
import { RUN, runAgent } from '../lib/agent.js';
import { buildServer } from '../lib/codemode.js';
import { Transcript } from '../lib/transcript.js';
import { auditLines, GATEKEEPER_BIN, readAudit, REPO, startWorld, type World } from '../lib/world.js';

const CHROMIUM = process.env.CHROMIUM ?? '/usr/bin/chromium';
const OUT = process.env.CONSOLE_OUT ?? join(REPO, 'walkthroughs/build/console-out');
const GOLDEN = join(REPO, 'walkthroughs/console/tail.golden');

/** The XSS payloads: each must show as text and never run. */
const XSS_TOOL = '<img src=x onerror=alert(1)>';
const XSS_OUT = `<script>alert('out')</script><img src=x onerror=alert(2)>`;
const XSS_CODE = `# <img src=x onerror=alert(3)><script>alert(4)</script>\nprint(${JSON.stringify(XSS_OUT)})`;

const t = new Transcript(7, 'Live console in a real browser');
t.header('The real sidecar with --ui; a real Agent SDK query and a raw protocol client make traffic;',
  `headless Chromium (${CHROMIUM}) logs in and checks the stream, filters, a run, a query and the overview.`);

/** UPDATE_GOLDEN rewrites the golden file instead of comparing with it; CI never may. */
const UPDATE_GOLDEN = process.env.UPDATE_GOLDEN !== undefined && process.env.UPDATE_GOLDEN !== '';
if (UPDATE_GOLDEN && process.env.CI === 'true') {
  t.fail('UPDATE_GOLDEN is refused under CI=true: it would rewrite console/tail.golden and compare the output with itself');
  process.exit(t.finish());
}

/** raw speaks docs/protocol.md over a WebSocket of its own. */
async function rawClient(w: World): Promise<{ decide: (tool: string, input: Record<string, unknown>) => Promise<Record<string, unknown>>; close: () => void }> {
  const token = readFileSync(w.tokenFile, 'utf8').trim();
  const ws = new WebSocket(`${w.url}/v1/ws`, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
  const waiting = new Map<string, (f: Record<string, unknown>) => void>();
  ws.on('message', (d) => {
    const f = JSON.parse(String(d)) as Record<string, unknown>;
    waiting.get(String(f.id))?.(f);
  });
  await new Promise<void>((ok, fail) => {
    ws.once('open', () => ok());
    ws.once('error', fail);
  });
  let n = 0;
  const ask = (frame: Record<string, unknown>): Promise<Record<string, unknown>> => new Promise((ok) => {
    const id = `c${String(++n)}`;
    waiting.set(id, ok);
    ws.send(JSON.stringify({ ...frame, id }));
  });
  await ask({ type: 'hello', v: 1, client: 'console-test' });
  const q = String((await ask({ type: 'open_query' })).query_id);
  return {
    decide: (tool, input) => ask({ type: 'decide', query_id: q, event: 'PreToolUse', tool_name: tool, tool_input: input, tool_use_id: `toolu_raw_${String(n)}` }),
    close: () => ws.close(),
  };
}

/** status GETs a console path with the given headers and returns the status. */
function status(base: string, path: string, headers: Record<string, string> = {}): Promise<number> {
  return new Promise((done, fail) => {
    const req = request(`${base}${path}`, { headers }, (res) => {
      res.destroy();
      done(res.statusCode ?? 0);
    });
    req.on('error', fail);
    req.end();
  });
}

/** watch fails the test on any console error or page error in page. */
function watch(page: Page, name: string, dialogs: string[]): void {
  page.on('console', (m) => {
    if (m.type() === 'error') t.fail(`no console error in the ${name} page`, m.text());
  });
  page.on('pageerror', (e) => t.fail(`no page error in the ${name} page`, String(e)));
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    void d.dismiss();
  });
}

async function shot(page: Page, name: string): Promise<string> {
  const file = join(OUT, `${name}.png`);
  await page.screenshot({ path: file, fullPage: false });
  t.line('shot', file);
  return file;
}

/** rows returns the stream's rows as {decision, tool, rule, text}. */
function rows(page: Page): Promise<{ decision: string; tool: string; rule: string; kind: string; text: string }[]> {
  return page.$$eval('table.records tbody tr.rec', (trs) => trs.map((tr) => ({
    decision: tr.getAttribute('data-decision') ?? '',
    kind: tr.getAttribute('data-kind') ?? '',
    tool: tr.querySelector('td.tool')?.textContent ?? '',
    rule: tr.querySelector('td.rule')?.textContent ?? '',
    text: tr.textContent ?? '',
  })));
}

async function waitRows(page: Page, what: string, ok: (rs: Awaited<ReturnType<typeof rows>>) => boolean): Promise<Awaited<ReturnType<typeof rows>>> {
  const deadline = Date.now() + 15_000;
  for (;;) {
    const rs = await rows(page);
    if (ok(rs)) return rs;
    if (Date.now() > deadline) throw new Error(`the stream never showed ${what}; it shows:\n${rs.map((r) => r.text).join('\n')}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

async function setFilter(page: Page, name: string, value: string): Promise<void> {
  const sel = `.filters [name="${name}"]`;
  if (name === 'kind' || name === 'decision') {
    await page.select(sel, value);
  } else {
    await page.$eval(sel, (el) => {
      (el as HTMLInputElement).value = '';
    });
    if (value !== '') await page.type(sel, value);
    else await page.$eval(sel, (el) => el.dispatchEvent(new Event('input')));
  }
}

/** normalizeTail makes tail's output independent of ids, times, sizes and temp paths. */
function normalizeTail(out: string, w: World): string {
  const ids = new Map<string, string>();
  return out
    .split(w.dirs.root).join('$ROOT')
    .replace(/^\d\d:\d\d:\d\d\.\d{3}/gm, 'HH:MM:SS.mmm')
    .replace(/\bq_[0-9a-f]{8}\b/g, (id) => {
      if (!ids.has(id)) ids.set(id, `q_${String(ids.size + 1).padEnd(8, '.')}`);
      return ids.get(id) ?? id;
    })
    .replace(/\d+ ms · peak (?:[\d.]+ (?:MiB|KiB|B)|unknown)/g, 'N ms · peak N')
    .replace(/gatekeeper-sandbox:\S+/g, 'gatekeeper-sandbox:TAG');
}

/**
 * rotation runs a sidecar whose audit log rotates every few lines while a
 * browser page and `gatekeeper tail` follow it: both must show every line
 * of the rotated log once, in order, and the chain must verify across the
 * files.
 */
async function rotation(browser: Browser, dialogs: string[]): Promise<void> {
  t.section('The audit log rotates while the browser and tail follow (--audit-max-bytes 2k)');
  const r = await startWorld({ n: 8, ui: true, env: { GATEKEEPER_AUDIT_MAX_BYTES: '2k' } });
  const follower = spawn(GATEKEEPER_BIN, ['tail', '--url', r.url, '--token-file', r.tokenFile, '--backfill', '100000', '--json'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let followed = '';
  follower.stdout.on('data', (d: Buffer) => {
    followed += d.toString('utf8');
  });
  try {
    // A context of its own: the other sidecar's session cookie (same host,
    // another port) stays where it is.
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport({ width: 1440, height: 900 });
    watch(page, 'rotation', dialogs);
    await page.goto(r.loginURL ?? '');
    await page.waitForSelector('#conn[data-state="live"]');
    await runAgent(r, t, [
      { say: 'the model lists the workspace', call: { name: 'Glob', input: { pattern: '*' } } },
      { say: 'the model reads the fake SSH key', call: { name: 'Read', input: { file_path: '~/.ssh/id_rsa' } } },
    ], { tag: 'rot', prompt: 'Make the audit log rotate.' });
    const raw = await rawClient(r);
    for (let i = 0; i < 40; i++) await raw.decide('Read', { file_path: join(r.dirs.ws, `f${String(i)}.txt`) });
    raw.close();
    const lines = auditLines(r.auditLog);
    const seqs = lines.map((l) => (JSON.parse(l) as { seq: number }).seq);
    const rotations = lines.filter((l) => l.includes('"kind":"rotate"')).length;
    t.expect(rotations >= 5 && seqs.every((s, i) => s === i + 1), `the log rotated ${String(rotations)} times: ${String(lines.length)} lines, seq 1-${String(lines.length)}`);

    const rs = await waitRows(page, `all ${String(lines.length)} lines`, (x) => x.length >= lines.length);
    const shown = await page.$$eval('table.records tbody tr.rec', (trs) => trs.map((tr) => Number(tr.getAttribute('data-seq'))));
    t.expect(JSON.stringify(shown) === JSON.stringify(seqs.slice().reverse()), 'the browser, open through the rotations, shows every line once, newest first', JSON.stringify(shown));
    t.expect(rs.filter((x) => x.kind === 'rotate').length === rotations && rs.some((x) => x.kind === 'rotate' && x.text.includes('ROTATE') && x.text.includes('continues audit.jsonl.')), 'each rotate line shows as · ROTATE with the file it continues');
    await shot(page, 'rotation-stream');

    for (const deadline = Date.now() + 15_000; Date.now() < deadline && followed.split('\n').length <= lines.length; await new Promise((ok) => setTimeout(ok, 50)));
    t.expect(followed === `${lines.join('\n')}\n`, 'tail, following through the rotations, printed every line once, in order', followed.slice(-600));
    const back = execFileSync(GATEKEEPER_BIN, ['tail', '--url', r.url, '--token-file', r.tokenFile, '--no-follow', '--backfill', '100000', '--json'], { encoding: 'utf8' });
    t.expect(back === `${lines.join('\n')}\n`, 'tail --backfill prints every line of the rotated log once, in order', back.slice(0, 600));

    await page.goto(`${r.httpBase ?? ''}/ui/#/overview`);
    await page.waitForFunction(() => document.getElementById('chain-state')?.textContent === '✔ verifies', { timeout: 15_000 });
    await page.waitForFunction((n) => document.getElementById('chain-lines')?.textContent === String(n), { timeout: 15_000 }, lines.length);
    const range = await page.$eval('#chain-seqs', (x) => x.textContent ?? '');
    t.expect(range === `#1–#${String(lines.length)}`, `the overview's chain verifies across the files, ${range}`);
    await context.close();
  } finally {
    follower.kill('SIGTERM');
    await r.stop();
  }
}

/**
 * approvalWait: a program's nested call waits for a human (a raw protocol
 * client that declared approvals and holds its answer), and the page shows
 * the waiting call, then, once answered, the call's line with the answer.
 */
async function approvalWait(browser: Browser, dialogs: string[]): Promise<void> {
  t.section('A nested call waits for approval, then is answered');
  const bin = buildServer();
  const r = await startWorld({
    n: 9, ui: true,
    policy: {
      ask: ['mcp__crm__lookup'], netEnabled: false,
      mcpServers: { crm: { description: 'customer records', command: [bin, '-name', 'crm', '-records', '20'] } },
      codeCalls: { callable: { crm: ['lookup'] }, timeout: '60s' },
    },
  });
  const token = readFileSync(r.tokenFile, 'utf8').trim();
  const ws = new WebSocket(`${r.url}/v1/ws`, { headers: { Authorization: `Bearer ${token}` }, perMessageDeflate: false });
  const frames: Record<string, unknown>[] = [];
  const waiters: { ok: (f: Record<string, unknown>) => boolean; done: (f: Record<string, unknown>) => void }[] = [];
  ws.on('message', (d) => {
    const f = JSON.parse(String(d)) as Record<string, unknown>;
    frames.push(f);
    for (const w of waiters.splice(0)) {
      if (w.ok(f)) w.done(f);
      else waiters.push(w);
    }
  });
  const next = (ok: (f: Record<string, unknown>) => boolean, what: string): Promise<Record<string, unknown>> => {
    const seen = frames.find(ok);
    if (seen !== undefined) return Promise.resolve(seen);
    return new Promise((done, fail) => {
      const timer = setTimeout(() => fail(new Error(`no ${what}; frames: ${JSON.stringify(frames).slice(0, 2000)}`)), 60_000);
      waiters.push({
        ok,
        done: (f) => {
          clearTimeout(timer);
          done(f);
        },
      });
    });
  };
  try {
    await new Promise<void>((ok, fail) => {
      ws.once('open', () => ok());
      ws.once('error', fail);
    });
    const context = await browser.createBrowserContext();
    const page = await context.newPage();
    await page.setViewport({ width: 1440, height: 900 });
    watch(page, 'approval', dialogs);
    await page.goto(r.loginURL ?? '');
    await page.waitForSelector('#conn[data-state="live"]');
    t.expect(await page.$eval('#pending', (el) => (el as HTMLElement).hidden), 'with nothing waiting, the page shows no waiting calls');

    ws.send(JSON.stringify({ type: 'hello', id: 'h', v: 1, client: 'console-approval-test' }));
    await next((f) => f.id === 'h', 'welcome');
    ws.send(JSON.stringify({ type: 'open_query', id: 'o', approvals: true }));
    const q = String((await next((f) => f.id === 'o', 'query_opened')).query_id);
    const code = 'import gatekeeper_tools.crm as crm\nprint(crm.lookup(id=7)["name"])\n';
    ws.send(JSON.stringify({ type: 'decide', id: 'd', query_id: q, event: 'PreToolUse', tool_name: RUN, tool_input: { language: 'python', code }, tool_use_id: 'toolu_wait', mcp_server: { name: 'sandboxed_code', source: 'sdk' } }));
    const d = await next((f) => f.id === 'd', 'decision');
    t.expect(d.decision === 'allow', 'the run is allowed', JSON.stringify(d));
    ws.send(JSON.stringify({ type: 'run', id: 'r', query_id: q, tool_use_id: 'toolu_wait', language: 'python', code }));
    const ask = await next((f) => f.type === 'approval_request', 'approval_request');
    t.line('ask', `${String(ask.tool_name)} from run ${String(ask.run_id)}: ${String(ask.rule)}; the client holds its answer`);

    await page.waitForSelector('#pending:not([hidden]) li.pending-call', { timeout: 15_000 });
    // The panel redraws once a second from its own clock: wait until it has
    // counted past 2 s (it never would if it only drew when an event came).
    await page.waitForFunction(() => Number(/waiting (\d+) s/.exec(document.querySelector('#pending')?.textContent ?? '')?.[1] ?? -1) >= 2, { timeout: 10_000 }).catch(() => undefined);
    const shown = await page.$eval('#pending', (el) => (el as HTMLElement).innerText);
    t.line('page', shown.replace(/\s+/g, ' '));
    t.expect(shown.includes('crm.lookup') && shown.includes(String(ask.run_id)) && shown.includes('tools.ask_list') && shown.includes(String(ask.reason)),
      'the page shows the waiting call: crm.lookup, its run, the rule and the reason', shown);
    const secs = Number(/waiting (\d+) s/.exec(shown)?.[1] ?? -1);
    t.expect(secs >= 2, `the page shows how long it has waited (${String(secs)} s)`, shown);
    await shot(page, 'approval-waiting');

    ws.send(JSON.stringify({ type: 'approval', id: ask.id, decision: 'allow' }));
    const res = await next((f) => f.type === 'run_result', 'run_result');
    t.expect(res.exit_code === 0 && String(res.stdout).includes('crm-7'), 'allowed, the call went on and the program printed its record', JSON.stringify(res).slice(0, 400));
    await page.waitForSelector('#pending[hidden]', { timeout: 15_000 });
    const rs = await waitRows(page, 'the answered call', (x) => x.some((row) => row.kind === 'code_call' && row.text.includes('asked: client allow')));
    t.expect(rs.some((row) => row.kind === 'code_call' && row.text.includes('asked: client allow')), 'once answered, the waiting call is gone and its code_call line shows the answer (asked: client allow)');
    await shot(page, 'approval-answered');
    await context.close();
  } finally {
    ws.close();
    await r.stop();
  }
}

let w: World | undefined;
let browser: Browser | undefined;
let attacker: Server | undefined;
const profile = mkdtempSync(join(tmpdir(), 'gk-console-chromium-'));
try {
  mkdirSync(OUT, { recursive: true });
  w = await startWorld({ n: 7, ui: true });
  const base = w.httpBase ?? '';
  t.line('sidecar', `gatekeeper serve --ui (pid ${String(w.pid)}) on ${base}; one-time login ${w.loginURL?.replace(/code=.*/, 'code=…') ?? '?'}`);

  t.section('Traffic: a real Agent SDK query and a raw protocol client');
  await runAgent(w, t, [
    { say: 'the model runs Python whose code and output hold HTML', call: { name: RUN, input: { language: 'python', code: XSS_CODE, files: { 'data/in.csv': 'a,b\n1,2\n' } } } },
    { say: 'the model reads the fake SSH key', call: { name: 'Read', input: { file_path: '~/.ssh/id_rsa' } } },
    { say: 'the model fetches the cloud metadata address', call: { name: 'WebFetch', input: { url: 'http://169.254.169.254/latest/meta-data/', prompt: 'list it' } } },
    { say: 'the model lists the workspace', call: { name: 'Glob', input: { pattern: '*' } } },
  ], { tag: 'c', prompt: 'Show off the console.' });
  const raw = await rawClient(w);
  const d1 = await raw.decide(XSS_TOOL, { note: '<b>bold?</b>' });
  t.expect(d1.decision === 'deny', 'a tool named like HTML is denied', JSON.stringify(d1));
  const d2 = await raw.decide('WebFetch', { url: 'http://example.invalid/', api_key: 'sk-live-CONSOLE-SECRET' });
  t.line('raw', `WebFetch with an api_key → ${String(d2.decision)} ${String(d2.rule)}`);
  // A broken policy edit, refused on SIGHUP: the overview lists it and why.
  writeFileSync(w.policyFile, `${readFileSync(w.policyFile, 'utf8')}bogus: 1\n`);
  process.kill(w.pid, 'SIGHUP');
  const audit = readAudit(w.auditLog);
  const runRec = audit.find((r) => r.kind === 'run' && r.outcome === 'exited');
  t.expect(runRec !== undefined, 'the sandbox ran the code', JSON.stringify(audit.filter((r) => r.kind === 'run')));

  t.section('Refusals without a session or from another origin');
  t.expect(await status(base, '/ui/api/overview') === 401, 'the overview without a session is 401');
  t.expect(await status(base, '/ui/api/stream') === 401, 'the stream without a session is 401');
  const token = readFileSync(w.tokenFile, 'utf8').trim();
  t.expect(await status(base, '/ui/api/overview', { Authorization: `Bearer ${token}`, Origin: 'http://evil.example' }) === 403, 'the token from another origin is 403');

  browser = await puppeteer.launch({
    executablePath: CHROMIUM,
    headless: true,
    userDataDir: profile,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync', `--user-data-dir=${profile}`],
  });
  const page = await browser.newPage();
  await page.setViewport({ width: 1440, height: 900 });
  const dialogs: string[] = [];
  watch(page, 'console', dialogs);

  t.section('Login');
  await page.goto(`${base}/ui/`);
  await page.waitForSelector('#login:not([hidden])');
  await shot(page, 'login');
  await page.type('#token', token);
  await page.click('#login-form button[type=submit]');
  await page.waitForSelector('table.records tbody tr.rec');
  const cookie = (await page.cookies()).find((c) => c.name === 'gatekeeper_console');
  t.expect(cookie?.httpOnly === true && cookie.sameSite === 'Strict' && cookie.path === '/ui/', 'the session cookie is HttpOnly, SameSite=Strict, Path=/ui/', JSON.stringify(cookie));
  t.expect(await page.evaluate(() => document.cookie) === '', 'page script cannot read the session cookie');

  t.section('The stream');
  const all = await waitRows(page, 'the denies', (rs) => rs.some((r) => r.rule === 'host_fs.deny_glob') && rs.some((r) => r.tool === XSS_TOOL));
  const keyDeny = all.find((r) => r.rule === 'host_fs.deny_glob');
  t.expect(keyDeny?.decision === 'deny' && keyDeny.text.includes('✘') && keyDeny.text.includes('DENY'), 'the SSH key Read shows ✘ DENY with its rule host_fs.deny_glob', keyDeny?.text);
  const fetchDeny = all.find((r) => r.tool === 'WebFetch');
  t.expect(fetchDeny?.decision === 'deny' && fetchDeny.rule !== '', `the metadata WebFetch shows its deny and rule (${fetchDeny?.rule ?? '?'})`);
  t.expect(all.some((r) => r.kind === 'run' && r.text.includes('EXITED')), 'the run shows ✔ EXITED with its outcome');
  t.expect(all.some((r) => r.tool === XSS_TOOL), 'the tool named like HTML shows literally as text');
  t.expect(!all.some((r) => r.text.includes('sk-live-CONSOLE-SECRET')), 'no row shows the secret');
  const order = all.map((r) => r.text);
  const seqs = await page.$$eval('table.records tbody tr.rec', (trs) => trs.map((tr) => Number(tr.getAttribute('data-seq'))));
  t.expect(seqs.every((s, i) => i === 0 || (seqs[i - 1] ?? 0) > s), 'newest first', JSON.stringify(seqs));
  await shot(page, 'stream');
  // The full line of the secret-bearing call is masked as the log masks it.
  await page.$$eval('table.records tbody tr.rec', (trs) => (trs.find((tr) => tr.querySelector('td.tool')?.textContent === 'WebFetch') as HTMLElement | undefined)?.click());
  const line = await page.$eval('tr.line pre', (p) => p.textContent ?? '');
  t.expect(line.includes('"api_key": "***"') && !line.includes('CONSOLE-SECRET'), 'a row opens its audit line, with the api_key masked', line.slice(0, 300));

  t.section('Filters, search and pause');
  await setFilter(page, 'decision', 'deny');
  let rs = await waitRows(page, 'denies only', (x) => x.length > 0 && x.every((r) => r.decision === 'deny'));
  t.expect(rs.length >= 3 && rs.length < order.length, `decision=deny shows the ${String(rs.length)} denies only`);
  await setFilter(page, 'tool', 'WebFetch');
  rs = await waitRows(page, 'WebFetch denies only', (x) => x.length > 0 && x.every((r) => r.tool === 'WebFetch' && r.decision === 'deny'));
  t.expect(rs.length >= 2, `decision=deny and tool=WebFetch show ${String(rs.length)} rows, all WebFetch denies`);
  await shot(page, 'stream-filtered');
  await setFilter(page, 'tool', '');
  await setFilter(page, 'decision', '');
  await setFilter(page, 'q', 'id_rsa');
  rs = await waitRows(page, 'the search', (x) => x.length > 0 && x.every((r) => r.text.includes('id_rsa')));
  t.expect(rs.some((r) => r.rule === 'host_fs.deny_glob') && !rs.some((r) => r.tool === 'WebFetch'), 'the search box finds the SSH key Read and not the WebFetch calls');
  await setFilter(page, 'q', '');
  await waitRows(page, 'everything again', (x) => x.length >= order.length);
  await page.click('#pause');
  const before = (await rows(page)).length;
  await raw.decide('KillShell', { shell_id: '1' });
  await page.waitForFunction(() => document.getElementById('count')?.textContent?.includes('1 new') === true, { timeout: 10_000 });
  t.expect((await rows(page)).length === before, 'paused, a new record waits instead of showing');
  await page.click('#pause');
  const held = await waitRows(page, 'the held record', (x) => x.some((r) => r.tool === 'KillShell')).then(() => undefined, (err: unknown) => String(err));
  t.expect(held === undefined, 'resumed, the held record shows', held);
  raw.close();

  t.section('A run and its query');
  await page.click('a.open-run');
  await page.waitForSelector('#run-code');
  const code = await page.$eval('#run-code', (p) => p.textContent ?? '');
  const stdout = await page.$eval('pre.output.stdout', (p) => p.textContent ?? '');
  t.expect(code === XSS_CODE, 'the run shows its code literally', code);
  t.expect(stdout === `${XSS_OUT}\n`, 'the run shows its output literally', stdout);
  const filesText = await page.$eval('table.files', (x) => x.textContent ?? '');
  t.expect(filesText.includes('data/in.csv') && filesText.includes('8 B'), 'the run shows its input file and size', filesText);
  const policy = await page.$eval('#run-policy', (p) => p.textContent ?? '');
  t.expect(policy.includes('"runtime": "runc"'), 'the run shows its effective sandbox policy');
  const injected = await page.evaluate(() => document.querySelectorAll('img[src="x"], script:not([src]), b').length);
  t.expect(injected === 0, 'no element came from the model\'s text', String(injected));
  await shot(page, 'run');
  await page.click(`a[href^="#/query/"]`);
  await page.waitForSelector('h1 code');
  // The query view fetches its records after it draws its heading: wait for them.
  const qrows = await waitRows(page, "the query's records", (x) => x.length >= 6 && x[0]?.kind === 'query');
  t.expect(qrows.length >= 6 && qrows[0]?.kind === 'query', `the query view lists its ${String(qrows.length)} records in order, from the query's opening`);
  await shot(page, 'query');

  t.section('Overview');
  await page.goto(`${base}/ui/#/overview`);
  await page.waitForFunction(() => document.getElementById('chain-state')?.textContent === '✔ verifies', { timeout: 15_000 });
  const total = await page.$eval('#decision-total', (p) => p.textContent ?? '');
  t.expect(/^\d+ decided/.test(total) && !total.startsWith('0 '), `the overview counts decisions (${total})`);
  await page.waitForFunction(() => document.querySelector('table.reloads')?.textContent?.includes('refused') === true, { timeout: 15_000 });
  const overview = await page.evaluate(() => document.body.textContent ?? '');
  t.expect(overview.includes('first load') && overview.includes('✘ refused') && overview.includes('unknown key "bogus"'), 'the reload history shows the first load and the refused reload with its reason');
  t.expect(overview.includes('exited') && overview.includes('engine answers'), 'the overview shows runs by outcome and the runner\'s engine');
  const ovShot = await shot(page, 'overview');
  if (process.env.CONSOLE_SCREENSHOT) {
    // The README's picture: the stream, with the run opened below it.
    await page.goto(`${base}/ui/#/stream`);
    await page.waitForSelector('table.records tbody tr.rec');
    await page.setViewport({ width: 1280, height: 720 });
    await new Promise((r) => setTimeout(r, 500));
    const file = await shot(page, 'readme');
    copyFileSync(file, process.env.CONSOLE_SCREENSHOT);
    t.line('shot', `${process.env.CONSOLE_SCREENSHOT} (from ${file}; overview in ${ovShot})`);
  }
  t.expect(dialogs.length === 0, 'no dialog ever opened: every payload stayed text', dialogs.join(', '));

  t.section('From another origin, with the session cookie');
  attacker = createServer((_req, res) => {
    res.setHeader('Content-Type', 'text/html');
    res.end('<!doctype html><title>elsewhere</title>');
  });
  await new Promise<void>((ok) => attacker?.listen(0, '127.0.0.1', ok));
  const evilBase = `http://127.0.0.1:${String((attacker.address() as AddressInfo).port)}`;
  const evil = await browser.newPage();
  // The browser blocks these responses itself (CORP, CORS), so the page
  // never sees them: read what the server answered, and what the browser
  // sent, from the DevTools protocol.
  const cdp = await evil.createCDPSession();
  await cdp.send('Network.enable');
  const urls = new Map<string, string>();
  const seen = new Map<string, number>();
  const cookieSent = new Map<string, boolean>();
  cdp.on('Network.requestWillBeSent', (e) => {
    if (e.request.url.startsWith(base)) urls.set(e.requestId, new URL(e.request.url).pathname);
  });
  cdp.on('Network.requestWillBeSentExtraInfo', (e) => {
    const cookie = Object.entries(e.headers).find(([k]) => k.toLowerCase() === 'cookie')?.[1] ?? '';
    cookieSent.set(e.requestId, String(cookie).includes('gatekeeper_console='));
  });
  cdp.on('Network.responseReceivedExtraInfo', (e) => {
    seen.set(e.requestId, e.statusCode);
  });
  await evil.goto(`${evilBase}/`);
  // Same site (same host, another port): the Strict cookie is sent, so only
  // the server's origin check stands between this page and the data.
  await evil.evaluate(async (b) => {
    await fetch(`${b}/ui/api/records`, { credentials: 'include', mode: 'no-cors' }).catch(() => undefined);
    await fetch(`${b}/ui/api/login`, { method: 'POST', credentials: 'include', mode: 'no-cors', body: '{"token":"x"}' }).catch(() => undefined);
    await new Promise<void>((done) => {
      const es = new EventSource(`${b}/ui/api/stream`, { withCredentials: true });
      es.onerror = () => {
        es.close();
        done();
      };
    });
  }, base);
  const answered = (p: string): { status?: number; cookie?: boolean } => {
    const id = [...urls].find(([, path]) => path === p)?.[0] ?? '';
    return { status: seen.get(id), cookie: cookieSent.get(id) };
  };
  // The protocol's extra-info events may come after the page is done.
  for (const deadline = Date.now() + 10_000; Date.now() < deadline; await new Promise((r) => setTimeout(r, 50))) {
    if (['/ui/api/records', '/ui/api/login', '/ui/api/stream'].every((p) => answered(p).status !== undefined && answered(p).cookie !== undefined)) break;
  }
  for (const p of ['/ui/api/records', '/ui/api/login', '/ui/api/stream']) {
    const a = answered(p);
    t.expect(a.status === 403 && a.cookie === true, `${p} from ${evilBase}, with the session cookie sent, is refused with 403`, JSON.stringify(a));
  }
  await evil.close();

  t.section('gatekeeper tail on the same traffic');
  const tail = execFileSync(GATEKEEPER_BIN, ['tail', '--url', w.url, '--token-file', w.tokenFile, '--no-follow', '--backfill', '1000', '--color', 'never'], { encoding: 'utf8' });
  const norm = normalizeTail(tail, w);
  if (UPDATE_GOLDEN) {
    // A file just written matches itself: no expectation is counted for it.
    writeFileSync(GOLDEN, norm);
    t.note(`UPDATE_GOLDEN: rewrote ${GOLDEN}; review it with git diff (tail's output is not compared this run)`);
  } else {
    const golden = readFileSync(GOLDEN, 'utf8');
    t.expect(norm === golden, `tail's output (colours off, ids and times normalized) matches ${GOLDEN}`, norm === golden ? undefined : `got:\n${norm}`);
  }
  const asJSON = execFileSync(GATEKEEPER_BIN, ['tail', '--url', w.url, '--token-file', w.tokenFile, '--no-follow', '--backfill', '1000', '--json'], { encoding: 'utf8' });
  const fileLines = auditLines(w.auditLog);
  t.expect(asJSON.trimEnd().split('\n').every((l) => fileLines.includes(l)) && asJSON.trimEnd().split('\n').length === fileLines.length, 'tail --json prints the audit lines exactly as written');
  writeFileSync(join(OUT, 'tail.txt'), tail);

  await rotation(browser, dialogs);
  await approvalWait(browser, dialogs);
  t.expect(dialogs.length === 0, 'no dialog opened on the rotation page either', dialogs.join(', '));
} catch (err) {
  t.fail('the console test ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
  if (w !== undefined) t.note(`sidecar log:\n${w.log().slice(-3000)}`);
} finally {
  await browser?.close();
  attacker?.close();
  await w?.stop();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(t.finish());
