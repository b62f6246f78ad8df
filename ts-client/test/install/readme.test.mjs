// What a new user does, from ts-client/README.md ("Install", "A first agent")
// and the top README: a clean copy of the checkout (its tracked files, no
// node_modules, no dist, no bin), `make build` there, the README's install
// commands run as written (only the checkout's path filled in), which make
// the client's tarball and install it with its peers from the npm registry
// into a fresh project; the README's agent.mjs, taken from the README; the
// built binary copied out of the checkout and serving the shipped policy on
// the real Docker engine; one query with a scripted model. The agent must
// print what the README says it prints: the Read of a key denied by
// host_fs.deny_glob, the Python run allowed and run in the sandbox.
//
// Needs git, go, make, node, npm, the npm registry, a Docker engine and the
// default sandbox image (make test-install sets up the last two). Without an
// engine the test is skipped, saying so, unless CI=true: then it fails.

import { spawn, spawnSync } from 'node:child_process';
import { chmodSync, copyFileSync, existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { fileURLToPath, pathToFileURL } from 'node:url';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '..', '..', '..');
const CI = process.env.CI === 'true';
/** The placeholder the READMEs use for the checkout. */
const CHECKOUT = '/path/to/gatekeeper';

/** codeBlocks returns the fenced code blocks of a Markdown text, with their info strings. */
export function codeBlocks(markdown) {
  const blocks = [];
  const re = /^```([^\n`]*)\n([\s\S]*?)^```[ \t]*$/gm;
  for (let m = re.exec(markdown); m !== null; m = re.exec(markdown)) blocks.push({ lang: m[1].trim(), body: m[2] });
  return blocks;
}

/** only returns the one block that matches, failing with what was found otherwise. */
function only(blocks, what, match) {
  const found = blocks.filter(match);
  assert.equal(found.length, 1, `exactly one ${what} block in the README, found ${String(found.length)}`);
  return found[0].body;
}

/** outputPattern turns the README's expected output, where … stands for any text, into one regexp per line. */
export function outputPattern(line) {
  const parts = line.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('.*')}$`, 's');
}

/** run runs a command to its end, with its output in a log; it throws with the log's tail when it fails. */
function run(cmd, args, opts, log) {
  // stdin from /dev/null: on a socketpair, Debian's bash takes itself for a remote shell and reads bash.bashrc
  const r = spawnSync(cmd, args, { encoding: 'utf8', maxBuffer: 64 << 20, stdio: ['ignore', 'pipe', 'pipe'], ...opts });
  writeFileSync(log, `$ ${cmd} ${args.join(' ')}\n${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}\n`, { flag: 'a' });
  if (r.status !== 0) throw new Error(`${cmd} ${args.join(' ')} failed (${r.error ? String(r.error) : `exit ${String(r.status)}`}); log ${log}:\n${readFileSync(log, 'utf8').slice(-4000)}`);
  return r.stdout;
}

/** engineMissing says why there is no Docker engine to run on, or undefined. */
function engineMissing() {
  const r = spawnSync('docker', ['info', '--format', '{{.ServerVersion}}'], { encoding: 'utf8', timeout: 30_000 });
  if (r.error) return `docker: ${String(r.error)}`;
  if (r.status !== 0) return `docker info: ${r.stderr.trim()}`;
  return undefined;
}

/** cleanCopy copies the checkout's tracked files (as they are in the work tree) to dir. */
function cleanCopy(dir, log) {
  const files = run('git', ['-C', ROOT, 'ls-files', '-z', '--cached'], {}, log).split('\0').filter((f) => f !== '' && existsSync(join(ROOT, f)));
  assert.ok(files.includes('Makefile') && files.includes('ts-client/package.json'), 'git lists the checkout\'s files');
  for (const f of files) {
    mkdirSync(dirname(join(dir, f)), { recursive: true });
    copyFileSync(join(ROOT, f), join(dir, f)); // keeps the mode: scripts stay executable
  }
}

/** startSidecar starts serve and resolves with the GATEKEEPER_URL it prints. */
function startSidecar(bin, args, opts, logFile) {
  const child = spawn(bin, ['serve', ...args], { ...opts, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const url = new Promise((resolveUrl, reject) => {
    const seen = (d) => {
      out += String(d);
      writeFileSync(logFile, out);
      const m = /^GATEKEEPER_URL=(\S+)$/m.exec(out);
      if (m) resolveUrl(m[1]);
    };
    child.stdout.on('data', seen);
    child.stderr.on('data', seen);
    child.once('exit', (code, sig) => reject(new Error(`gatekeeper serve exited (${String(code ?? sig)}) before printing GATEKEEPER_URL:\n${out}`)));
    // The start-up cleanup waits out a wedged engine for 30 s (README); twice that is a dead sidecar.
    setTimeout(() => reject(new Error(`gatekeeper serve printed no GATEKEEPER_URL within 60 s:\n${out}`)), 60_000).unref();
  });
  const stop = () =>
    new Promise((r) => {
      if (child.exitCode !== null || child.signalCode !== null) return r();
      const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
      child.once('exit', () => {
        clearTimeout(t);
        r();
      });
      child.kill('SIGTERM');
    });
  return { url, stop, log: () => out };
}

/** runAgent runs `node agent.mjs` in the project and collects its output. */
function runAgent(dir, env, limitMs) {
  return new Promise((resolveRun) => {
    const child = spawn(process.execPath, ['agent.mjs'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += String(d)));
    child.stderr.on('data', (d) => (stderr += String(d)));
    const timer = setTimeout(() => child.kill('SIGKILL'), limitMs);
    child.once('exit', (code, signal) => {
      clearTimeout(timer);
      resolveRun({ code, signal, stdout, stderr });
    });
  });
}

test('a new user installs the client from the README and its example agent runs as the README says', { timeout: 20 * 60_000 }, async (t) => {
  const missing = engineMissing();
  if (missing !== undefined) {
    assert.ok(!CI, `no Docker engine (CI=true, so this fails): ${missing}`);
    t.skip(`no Docker engine: ${missing}`);
    return;
  }
  const started = Date.now();
  const phase = (what) => t.diagnostic(`${what} (${String(Math.round((Date.now() - started) / 1000))} s in)`);
  const tmp = mkdtempSync(join(tmpdir(), 'gk-install-'));
  const log = join(tmp, 'commands.log');
  let passed = false;
  t.after(() => {
    if (passed) rmSync(tmp, { recursive: true, force: true });
    else t.diagnostic(`kept for a look: ${tmp}`);
  });

  // A clean checkout and the binary, built the one documented way.
  const checkout = join(tmp, 'gatekeeper');
  cleanCopy(checkout, log);
  for (const d of ['bin', 'ts-client/node_modules', 'ts-client/dist']) assert.ok(!existsSync(join(checkout, d)), `the copy has no ${d}`);
  run('make', ['build'], { cwd: checkout }, log);
  phase('make build in a clean copy');

  // The READMEs: one install block, the same npm install line in both.
  const clientReadme = readFileSync(join(checkout, 'ts-client', 'README.md'), 'utf8');
  const blocks = codeBlocks(clientReadme);
  const install = only(blocks, 'install (sh, npm install of the tarball)', (b) => b.lang === 'sh' && b.body.includes('npm install ') && b.body.includes('gatekeeper-client-'));
  const npmInstall = install.split('\n').filter((l) => l.startsWith('npm install '));
  assert.equal(npmInstall.length, 1, `one npm install line in the install block:\n${install}`);
  const version = JSON.parse(readFileSync(join(checkout, 'ts-client', 'package.json'), 'utf8')).version;
  assert.ok(npmInstall[0].includes(`${CHECKOUT}/bin/gatekeeper-client-${version}.tgz`), `the README installs the tarball of version ${version}: ${npmInstall[0]}`);
  const topReadme = readFileSync(join(checkout, 'README.md'), 'utf8');
  assert.ok(topReadme.split('\n').some((l) => l.trim().startsWith(npmInstall[0].trim())), `README.md's quick start has the same line as ts-client/README.md: ${npmInstall[0]}`);
  const agent = only(blocks, 'agent.mjs (js)', (b) => b.lang === 'js' && b.body.startsWith('// agent.mjs'));
  const expected = only(blocks, 'expected output (text)', (b) => b.lang === 'text')
    .split('\n')
    .filter((l) => l !== '');

  // The README's commands, as written, in a directory of the user's; the checkout's path filled in.
  const user = join(tmp, 'user');
  mkdirSync(user);
  run('bash', ['-euo', 'pipefail', '-c', install.replaceAll(CHECKOUT, checkout)], { cwd: user, env: { ...process.env, npm_config_loglevel: 'error', npm_config_fund: 'false', npm_config_audit: 'false' } }, log);
  phase('the README\'s install commands');
  const project = join(user, 'my-agent');
  const tgz = join(checkout, 'bin', `gatekeeper-client-${version}.tgz`);
  assert.ok(existsSync(tgz), `make client wrote ${tgz}`);
  const manifest = JSON.parse(readFileSync(join(project, 'package.json'), 'utf8'));
  assert.match(manifest.dependencies?.['@gatekeeper/client'] ?? '', /^file:.*gatekeeper-client-.*\.tgz$/, 'the project depends on the tarball');
  assert.ok(manifest.dependencies?.['@anthropic-ai/claude-agent-sdk'] && manifest.dependencies?.zod, 'and on the peers');
  const peers = JSON.parse(readFileSync(join(checkout, 'ts-client', 'package.json'), 'utf8')).peerDependencies;
  const sdkVersion = JSON.parse(readFileSync(join(project, 'node_modules', '@anthropic-ai', 'claude-agent-sdk', 'package.json'), 'utf8')).version;
  assert.equal(sdkVersion, peers['@anthropic-ai/claude-agent-sdk'], 'the installed SDK is the peer the client pins');
  const zodMajor = JSON.parse(readFileSync(join(project, 'node_modules', 'zod', 'package.json'), 'utf8')).version.split('.')[0];
  assert.equal(`^${zodMajor}.0.0`, peers.zod, 'the installed zod is in the peer range');
  assert.ok(npmInstall[0].includes(`@anthropic-ai/claude-agent-sdk@${sdkVersion} `), 'which the README names');
  const installed = join(project, 'node_modules', '@gatekeeper', 'client');
  assert.ok(existsSync(join(installed, 'dist', 'index.js')), 'the installed client has its dist/');
  assert.ok(!lstatSync(installed).isSymbolicLink(), 'a copy, not a link to the checkout');
  writeFileSync(join(project, 'agent.mjs'), agent);

  // The Go side: the binary make build wrote, copied out of the checkout, serving the shipped policy.
  const side = join(tmp, 'sidecar');
  const home = join(tmp, 'home');
  mkdirSync(join(side, 'workspace'), { recursive: true });
  mkdirSync(join(home, '.ssh'), { recursive: true, mode: 0o700 });
  const secret = `gk-install-secret-${String(process.pid)}`;
  writeFileSync(join(home, '.ssh', 'id_rsa'), `-----BEGIN OPENSSH PRIVATE KEY-----\n${secret}\n-----END OPENSSH PRIVATE KEY-----\n`, { mode: 0o600 });
  const bin = join(side, 'gatekeeper');
  copyFileSync(join(checkout, 'bin', 'gatekeeper'), bin);
  chmodSync(bin, 0o755);
  copyFileSync(join(checkout, 'sandbox.policy.yaml'), join(side, 'sandbox.policy.yaml'));
  const token = join(side, 'token');
  const sidecar = startSidecar(
    bin,
    ['--policy', 'sandbox.policy.yaml', '--listen', `unix://${join(side, 'gk.sock')}`, '--token-file', token, '--audit-log', join(side, 'audit.jsonl'), '--state-dir', join(side, 'state'), '--instance', `install-${String(process.pid)}`],
    { cwd: side, env: { ...process.env, HOME: home } },
    join(side, 'sidecar.log'),
  );
  t.after(() => sidecar.stop());
  const url = await sidecar.url;
  phase(`the sidecar serves on ${url}`);

  // The scripted model, from the installed package's own testing entry point.
  const testing = await import(pathToFileURL(createRequire(join(project, 'package.json')).resolve('@gatekeeper/client/testing')).href);
  const fake = await testing.startFakeModel({
    script: [
      { type: 'tool_use', name: 'Read', input: { file_path: join(home, '.ssh', 'id_rsa') } },
      { type: 'tool_use', name: 'mcp__sandboxed_code__run', input: { language: 'python', code: 'print(6*7)' } },
      { type: 'text', text: 'The key stays private; 6*7 is 42.' },
    ],
  });
  t.after(() => fake.close());

  const r = await runAgent(project, fake.env(home, { GATEKEEPER_URL: url, GATEKEEPER_TOKEN_FILE: token }), 180_000);
  phase('node agent.mjs');
  const context = `agent exit ${String(r.code ?? r.signal)}\nstdout:\n${r.stdout}\nstderr:\n${r.stderr.slice(-3000)}\nsidecar:\n${sidecar.log().slice(-3000)}`;
  assert.equal(r.code, 0, `node agent.mjs exits 0\n${context}`);
  assert.deepEqual(fake.errors, [], 'the fake model ran its script');

  // What the model read.
  const results = fake.toolResults();
  assert.equal(results.length, 2, `two tool results reached the model\n${JSON.stringify(results, null, 1)}`);
  const [read, ran] = results;
  assert.equal(read.is_error, true, `the Read is an error result: ${read.text}`);
  assert.match(read.text, /\[gatekeeper rule: host_fs\.deny_glob\]/, 'denied by the fs.deny rule');
  assert.equal(ran.is_error, false, `the run is not an error: ${ran.text}`);
  const report = JSON.parse(ran.text.slice(0, ran.text.lastIndexOf('}') + 1));
  assert.equal(report.exit_code, 0, ran.text);
  assert.equal(report.stdout, '42\n', ran.text);
  for (const req of fake.requests) assert.ok(!JSON.stringify(req).includes(secret), 'the key never reached the model');

  // What the agent printed: the README's expected output, line by line.
  const lines = r.stdout.split('\n').filter((l) => l !== '');
  assert.equal(lines.length, expected.length, `the agent printed ${String(expected.length)} lines as the README shows\n${context}`);
  expected.forEach((want, i) => assert.match(lines[i], outputPattern(want), `line ${String(i + 1)} is as the README shows`));

  // What the sidecar recorded: both decisions, in a chain that verifies.
  run(bin, ['audit', 'verify', join(side, 'audit.jsonl')], { cwd: side }, log);
  const audit = readFileSync(join(side, 'audit.jsonl'), 'utf8').split('\n').filter((l) => l !== '').map((l) => JSON.parse(l));
  const has = (what, f) => assert.ok(audit.some(f), `the audit log has ${what}\n${JSON.stringify(audit, null, 1).slice(0, 6000)}`);
  has('the Read denied by host_fs.deny_glob', (a) => a.kind === 'decision' && a.tool === 'Read' && a.decision === 'deny' && a.rule === 'host_fs.deny_glob');
  has('the run allowed', (a) => a.kind === 'decision' && a.tool === 'mcp__sandboxed_code__run' && a.decision === 'allow');
  has('the run exited 0', (a) => a.kind === 'run' && a.outcome === 'exited' && a.exit_code === 0);
  passed = true;
});

test('the README output lines are patterns that hold only what they say', () => {
  const p = outputPattern('refused: PreToolUse:Read hook error: Read of … is forbidden by the policy\'s fs.deny pattern "…" [gatekeeper rule: host_fs.deny_glob]');
  assert.match('refused: PreToolUse:Read hook error: Read of /h/.ssh/id_rsa is forbidden by the policy\'s fs.deny pattern "/h/.*" [gatekeeper rule: host_fs.deny_glob]', p);
  assert.doesNotMatch('refused: PreToolUse:Read hook error: Read of /h/.ssh/id_rsa is forbidden by the policy\'s fs.deny pattern "/h/.*" [gatekeeper rule: tools.deny]', p, 'another rule');
  assert.doesNotMatch('x refused: PreToolUse:Read hook error: Read of a is forbidden by the policy\'s fs.deny pattern "b" [gatekeeper rule: host_fs.deny_glob]', p, 'anchored at the start');
  assert.doesNotMatch('ran: exit 1, stdout "42\\n"', outputPattern('ran: exit 0, stdout "42\\n"'), 'another exit code');
  assert.doesNotMatch('ran: exit 0, stdout "42\\n" and more', outputPattern('ran: exit 0, stdout "42\\n"'), 'anchored at the end');
  const blocks = codeBlocks('text\n```sh\nnpm install x\n```\n\n```js\n// agent.mjs\nx()\n```\n');
  assert.deepEqual(blocks, [{ lang: 'sh', body: 'npm install x\n' }, { lang: 'js', body: '// agent.mjs\nx()\n' }]);
});
