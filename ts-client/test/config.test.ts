import { test } from 'node:test';
import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, mkdirSync, mkdtempSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GatekeeperConfigError, defaultTokenFile, defaultUrl, parseUrl, resolveConfig, sharedDirProblem, stderrLogger, tokenSource } from '../src/config.js';
import { GATEKEEPER_BIN } from './helpers/sidecar.js';

test('parseUrl turns each GATEKEEPER_URL form into the address ws dials', () => {
  const cases: { name: string; url: string; want: string }[] = [
    { name: 'a unix URL gets the ws+unix form with the protocol path', url: 'unix:///run/gk/gatekeeper.sock', want: 'ws+unix:///run/gk/gatekeeper.sock:/v1/ws' },
    { name: 'a bare absolute path is a unix socket', url: '/tmp/x/gk.sock', want: 'ws+unix:///tmp/x/gk.sock:/v1/ws' },
    { name: 'a ws URL without a path gets /v1/ws', url: 'ws://127.0.0.1:7777', want: 'ws://127.0.0.1:7777/v1/ws' },
    { name: 'a ws URL with only a slash gets /v1/ws', url: 'ws://127.0.0.1:7777/', want: 'ws://127.0.0.1:7777/v1/ws' },
    { name: 'a ws URL with a path keeps it', url: 'ws://127.0.0.1:7777/custom/ws', want: 'ws://127.0.0.1:7777/custom/ws' },
    { name: 'a tcp URL, as the sidecar listens, is dialled as ws', url: 'tcp://127.0.0.1:7777', want: 'ws://127.0.0.1:7777/v1/ws' },
    { name: 'a wss URL stays wss', url: 'wss://gk.internal:443', want: 'wss://gk.internal/v1/ws' },
    { name: 'an IPv6 loopback keeps its brackets', url: 'ws://[::1]:7777', want: 'ws://[::1]:7777/v1/ws' },
    { name: 'surrounding white space is ignored', url: '  ws://localhost:1  ', want: 'ws://localhost:1/v1/ws' },
  ];
  for (const c of cases) assert.equal(parseUrl(c.url), c.want, c.name);
});

test('parseUrl refuses URLs it cannot dial, saying why', () => {
  const cases: { name: string; url: string; want: RegExp }[] = [
    { name: 'empty', url: '', want: /empty/ },
    { name: 'a relative unix path', url: 'unix://run/gk.sock', want: /must be absolute/ },
    { name: 'a unix path with a colon (ws would split it)', url: 'unix:///tmp/a:b.sock', want: /must not contain ":"/ },
    { name: 'an http URL', url: 'http://127.0.0.1:7777', want: /unsupported scheme http:/ },
    { name: 'credentials in the URL', url: 'ws://user:pw@127.0.0.1:7777', want: /credentials/ },
    { name: 'not a URL', url: 'gatekeeper.sock', want: /not a URL/ },
  ];
  for (const c of cases) {
    assert.throws(() => parseUrl(c.url), (err: unknown) => err instanceof GatekeeperConfigError && c.want.test(err.message), c.name);
  }
});

test("the /tmp default socket's directory is not trusted when another user made it (or a link to it)", () => {
  assert.equal(process.getuid?.(), 0, 'this test makes a directory of another user and needs root');
  const base = mkdtempSync(join(tmpdir(), 'gk-shared-'));
  const theirs = join(base, 'gatekeeper-0');
  mkdirSync(theirs, { mode: 0o777 });
  chownSync(theirs, 65534, 65534);
  const link = join(base, 'link');
  symlinkSync(theirs, link);
  for (const dir of [theirs, link]) {
    assert.match(sharedDirProblem(dir) ?? '', /belongs to uid 65534, not to this user \(uid 0\) or root/, dir);
  }
  const emptyDir = join(base, 'emptydir');
  mkdirSync(emptyDir);
  chmodSync(emptyDir, 0o777);
  assert.equal(sharedDirProblem(emptyDir), undefined, "root's directory, writable by all as a Pod's emptyDir, is accepted");
  assert.equal(sharedDirProblem(join(base, 'missing')), undefined, 'a missing directory is left to the connection to report');
});

test('defaultUrl is the sidecar default socket', () => {
  assert.equal(defaultUrl({ XDG_RUNTIME_DIR: '/run/user/1000/' }), 'unix:///run/user/1000/gatekeeper.sock');
  const uid = process.getuid?.() ?? 0;
  assert.equal(defaultUrl({}), `unix:///tmp/gatekeeper-${String(uid)}/gatekeeper.sock`);
});

test('the token comes from token, else tokenFile, else GATEKEEPER_TOKEN, else GATEKEEPER_TOKEN_FILE, else serve\'s default file', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gk-token-'));
  const optFile = join(dir, 'opt');
  const envFile = join(dir, 'env');
  writeFileSync(optFile, '  from-option-file \n\n');
  writeFileSync(envFile, 'from-env-file\n');
  const env = { GATEKEEPER_TOKEN: 'from-env', GATEKEEPER_TOKEN_FILE: envFile };
  const cases: { name: string; opts: { token?: string; tokenFile?: string }; env: NodeJS.ProcessEnv; want: string }[] = [
    { name: 'token wins over everything', opts: { token: 'literal', tokenFile: optFile }, env, want: 'literal' },
    { name: 'tokenFile is read and trimmed', opts: { tokenFile: optFile }, env, want: 'from-option-file' },
    { name: 'GATEKEEPER_TOKEN wins over GATEKEEPER_TOKEN_FILE', opts: {}, env, want: 'from-env' },
    { name: 'GATEKEEPER_TOKEN_FILE wins over the default file', opts: {}, env: { GATEKEEPER_TOKEN_FILE: envFile, HOME: dir }, want: 'from-env-file' },
    { name: "serve's default file under HOME is the last resort", opts: {}, env: { HOME: dir }, want: 'from-default-file' },
  ];
  mkdirSync(join(dir, '.config', 'gatekeeper'), { recursive: true });
  writeFileSync(join(dir, '.config', 'gatekeeper', 'token'), 'from-default-file\n');
  for (const c of cases) assert.equal(tokenSource(c.opts, c.env)(), c.want, c.name);
  assert.equal(tokenSource({}, { HOME: dir }).origin, `serve's default token file (${join(dir, '.config', 'gatekeeper', 'token')})`);
});

test('a token file is read on every connection, so a rotated token is used', () => {
  const dir = mkdtempSync(join(tmpdir(), 'gk-token-'));
  const file = join(dir, 'token');
  writeFileSync(file, 'one\n');
  const token = tokenSource({ tokenFile: file }, {});
  assert.equal(token(), 'one');
  writeFileSync(file, 'two\n');
  assert.equal(token(), 'two');
});

test('token problems are reported: an empty literal at once, a missing or empty file when read', () => {
  assert.throws(() => tokenSource({ token: '  ' }, {}), (err: unknown) => err instanceof GatekeeperConfigError && /empty/.test(err.message));
  const noDefault = tokenSource({}, { HOME: '/nonexistent/home' });
  assert.throws(() => noDefault(), /cannot read the token file \/nonexistent\/home\/\.config\/gatekeeper\/token \(serve's default token file\)/);
  const missing = tokenSource({ tokenFile: '/nonexistent/gk/token' }, {});
  assert.throws(() => missing(), /cannot read the token file \/nonexistent\/gk\/token/);
  const dir = mkdtempSync(join(tmpdir(), 'gk-token-'));
  writeFileSync(join(dir, 'empty'), ' \n');
  assert.throws(() => tokenSource({ tokenFile: join(dir, 'empty') }, {})(), /is empty/);
});

test('resolveConfig takes the URL from the options, else GATEKEEPER_URL', () => {
  const env = { GATEKEEPER_URL: 'ws://127.0.0.1:9', GATEKEEPER_TOKEN: 't' };
  assert.equal(resolveConfig({}, env).address, 'ws://127.0.0.1:9/v1/ws');
  assert.equal(resolveConfig({ url: 'unix:///a.sock' }, env).address, 'ws+unix:///a.sock:/v1/ws');
  assert.equal(resolveConfig({}, env).decisionTimeoutMs, 2000);
  assert.throws(() => resolveConfig({ decisionTimeoutMs: 0 }, env), /decisionTimeoutMs/);
});

/** serveDefaults reads serve's --token-file and --listen defaults from its --help, run with env. */
function serveDefaults(env: NodeJS.ProcessEnv): { tokenFile: string; listen: string } {
  const r = spawnSync(GATEKEEPER_BIN, ['serve', '--help'], { encoding: 'utf8', env });
  const help = `${r.stdout}${r.stderr}`;
  const flag = (name: string): string => {
    const m = new RegExp(`--${name} \\(env [A-Z_]+\\)\\n[^\\n]*\\(default "([^"]*)"\\)`).exec(help);
    assert.ok(m?.[1], `serve --help shows a default for --${name}:\n${help}`);
    return m[1];
  };
  return { tokenFile: flag('token-file'), listen: flag('listen') };
}

test("the client's default token file and address are serve's defaults (serve --help of the real binary)", () => {
  const home = mkdtempSync(join(tmpdir(), 'gk-home-'));
  const cases: { name: string; env: NodeJS.ProcessEnv }[] = [
    { name: 'HOME only', env: { HOME: home } },
    { name: 'XDG_CONFIG_HOME and XDG_RUNTIME_DIR set', env: { HOME: home, XDG_CONFIG_HOME: join(home, 'cfg'), XDG_RUNTIME_DIR: join(home, 'run') } },
  ];
  for (const c of cases) {
    const serve = serveDefaults(c.env);
    assert.equal(defaultTokenFile(c.env), serve.tokenFile, c.name);
    assert.equal(defaultUrl(c.env), serve.listen, c.name);
  }
  assert.equal(defaultTokenFile({ HOME: home }), join(home, '.config', 'gatekeeper', 'token'), 'the README\'s ~/.config/gatekeeper/token');
});

test('the default logger writes warnings and errors to stderr, and nothing else', () => {
  const logger = resolveConfig({ token: 't' }, {}).logger;
  assert.equal(logger, stderrLogger);
  assert.equal(logger.debug, undefined);
  assert.equal(logger.info, undefined);
  const written: string[] = [];
  const write = process.stderr.write.bind(process.stderr);
  process.stderr.write = ((chunk: string | Uint8Array) => {
    written.push(String(chunk));
    return true;
  }) as typeof process.stderr.write;
  try {
    logger.warn?.('gatekeeper: connection lost', { reason: 'x' });
    logger.error?.('gatekeeper: broken');
  } finally {
    process.stderr.write = write;
  }
  assert.deepEqual(written, ['[warn] gatekeeper: connection lost {"reason":"x"}\n', '[error] gatekeeper: broken\n']);
  assert.deepEqual(resolveConfig({ token: 't', logger: {} }, {}).logger, {}, 'a logger given replaces it');
});
