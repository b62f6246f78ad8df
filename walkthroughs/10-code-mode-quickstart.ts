// Walkthrough 10: the code-mode quickstart of the top README.md, run as a
// new user would run it. The README's file blocks (stock.mjs, an MCP server
// of the user's own built with the official TypeScript MCP SDK;
// code-mode.yaml, the mcp_servers and code_calls added to the shipped
// policy; agent.mjs, an in-process createSdkMcpServer tool and the scripted
// model) must be the files shipped in walkthroughs/quickstart/, byte for
// byte. They are copied into a fresh project directory, and the README's
// commands run there as written (only the checkout's path filled in), with
// every default: serve's socket, token file, audit log and state under a
// fresh HOME and XDG_RUNTIME_DIR, so that the client finds the sidecar and
// its token with no settings at all. What they print must be what the
// README shows, line for line.

import { spawn, spawnSync } from 'node:child_process';
import { cpSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { clip, Transcript } from './lib/transcript.js';
import { GATEKEEPER_BIN, REPO } from './lib/world.js';

/** The placeholder the READMEs use for the checkout. */
const CHECKOUT = '/path/to/gatekeeper';
/** The README section this walkthrough runs. */
const SECTION = '### Code mode, a quickstart';
/** The shipped example, walkthroughs/quickstart/ (this file runs from walkthroughs/build/). */
const EXAMPLE = join(dirname(fileURLToPath(import.meta.url)), '..', 'quickstart');
const KEEP = process.env.WALKTHROUGH_KEEP === '1';

const t = new Transcript(10, 'Code-mode quickstart');
t.header(
  "The top README's code-mode quickstart, as written: a stdio MCP server of the user's own (official TypeScript MCP SDK),",
  'mcp_servers and code_calls added to the shipped policy, an in-process createSdkMcpServer tool, the scripted model;',
  "then gatekeeper tail and gatekeeper audit verify. Every default: the client finds serve's socket and token by itself.",
);

/** section returns the README text from the heading to the next heading of its level or above, outside code blocks. */
function section(markdown: string, heading: string): string {
  const lines = markdown.split('\n');
  const start = lines.indexOf(heading);
  if (start < 0) throw new Error(`README.md has no section "${heading}"`);
  let fenced = false;
  let end = lines.length;
  for (let i = start + 1; i < lines.length; i++) {
    const l = lines[i] ?? '';
    if (l.startsWith('```')) fenced = !fenced;
    else if (!fenced && /^#{1,3} /.test(l)) {
      end = i;
      break;
    }
  }
  return lines.slice(start + 1, end).join('\n');
}

/** codeBlocks returns the fenced code blocks of a Markdown text, with their info strings. */
function codeBlocks(markdown: string): { lang: string; body: string }[] {
  const out: { lang: string; body: string }[] = [];
  const re = /^```([^\n`]*)\n([\s\S]*?)^```[ \t]*$/gm;
  for (let m = re.exec(markdown); m !== null; m = re.exec(markdown)) out.push({ lang: (m[1] ?? '').trim(), body: m[2] ?? '' });
  return out;
}

/** outputPattern turns an expected line, where … stands for any text, into a regexp of the whole line. */
function outputPattern(line: string): RegExp {
  const parts = line.split('…').map((p) => p.replace(/[.*+?^${}()|[\]\\]/g, '\\$&'));
  return new RegExp(`^${parts.join('.*')}$`, 's');
}

/** fileName is the name a block's first line gives it (`// agent.mjs: …`, `# code-mode.yaml: …`), or undefined. */
function fileName(body: string): string | undefined {
  return /^(?:\/\/|#) ([\w.-]+\.(?:mjs|yaml)):/.exec(body)?.[1];
}

const root = mkdtempSync(join(tmpdir(), 'gk-quickstart-'));
const home = join(root, 'home');
const run = join(root, 'run');
mkdirSync(home);
mkdirSync(run, { mode: 0o700 });
// The project lives under walkthroughs/build/, so that node finds the walkthroughs' node_modules
// (@gatekeeper/client, the Agent SDK, the MCP SDK, zod), as it finds the user's own.
const project = join(dirname(fileURLToPath(import.meta.url)), `quickstart-${String(process.pid)}`);
mkdirSync(project, { recursive: true });
// A new user's machine: HOME and XDG_RUNTIME_DIR of its own, no gatekeeper variables; a sidecar
// instance of its own (GATEKEEPER_INSTANCE is serve's --instance), so that no other sidecar's
// sandboxes on this machine are touched by its start-up cleanup.
const env: NodeJS.ProcessEnv = { PATH: process.env.PATH ?? '/usr/bin:/bin', LANG: 'C.UTF-8', HOME: home, XDG_RUNTIME_DIR: run, GATEKEEPER_INSTANCE: `quickstart-${String(process.pid)}` };
let serve: ReturnType<typeof spawn> | undefined;
let serveOut = '';

try {
  t.section('the README and the shipped example agree');
  const readme = readFileSync(join(REPO, 'README.md'), 'utf8');
  const blocks = codeBlocks(section(readme, SECTION));
  const files = blocks.flatMap((b) => {
    const name = fileName(b.body);
    return name === undefined ? [] : [{ name, body: b.body }];
  });
  const shipped = readdirSync(EXAMPLE).sort();
  t.expect(
    JSON.stringify(files.map((f) => f.name).sort()) === JSON.stringify(shipped),
    `the README shows the example's files, each once: ${shipped.join(', ')}`,
    `README blocks: ${files.map((f) => f.name).join(', ')}`,
  );
  for (const f of files) {
    const onDisk = readFileSync(join(EXAMPLE, f.name), 'utf8');
    t.expect(f.body === onDisk, `the README's ${f.name} is walkthroughs/quickstart/${f.name}, byte for byte`, firstDifference(f.body, onDisk));
  }
  const commands = blocks.filter((b) => b.lang === 'sh');
  const expected = blocks.filter((b) => b.lang === 'text');
  if (commands.length !== 1 || expected.length !== 1) throw new Error(`the section has ${String(commands.length)} sh and ${String(expected.length)} text blocks, want one of each`);
  cpSync(EXAMPLE, project, { recursive: true });

  t.section("the README's commands, in a fresh project, with every default");
  const outputs: string[] = [];
  for (const raw of (commands[0]?.body ?? '').split('\n').filter((l) => l.trim() !== '' && !l.trim().startsWith('#'))) {
    const line = raw.replaceAll(`${CHECKOUT}/bin/gatekeeper`, GATEKEEPER_BIN).replaceAll(CHECKOUT, REPO);
    t.step('$', clip(raw.replace(/\s+#.*$/, ''), 120));
    const background = /&\s*(#.*)?$/.exec(line);
    if (background !== null) {
      // exec: the process started is serve itself, which the walkthrough stops at its end.
      const s = spawn('bash', ['-c', `exec ${line.slice(0, background.index)}`], { cwd: project, env, stdio: ['ignore', 'pipe', 'pipe'] });
      serve = s;
      s.stdout?.on('data', (d) => (serveOut += String(d)));
      s.stderr?.on('data', (d) => (serveOut += String(d)));
      await until(() => /^GATEKEEPER_URL=/m.test(serveOut) && /mcp server connected.*mcp_server=stock/.test(serveOut), 60_000, () => s.exitCode !== null, 'serve printed GATEKEEPER_URL and connected the stock server');
      t.line('serve', (/^GATEKEEPER_URL=\S+$/m.exec(serveOut) ?? [''])[0]);
      continue;
    }
    const r = spawnSync('bash', ['-euo', 'pipefail', '-c', line], { cwd: project, env, encoding: 'utf8', timeout: 240_000 });
    const out = `${r.stdout ?? ''}`;
    for (const l of out.split('\n').filter((l) => l !== '')) t.line('out', clip(l, 150));
    if (r.status !== 0) throw new Error(`${raw} failed (exit ${String(r.status ?? r.signal)}):\n${out}${r.stderr ?? ''}\nserve:\n${serveOut.slice(-3000)}`);
    outputs.push(out);
  }

  t.section('what they printed is what the README shows');
  const got = outputs.join('').split('\n').filter((l) => l !== '');
  const want = (expected[0]?.body ?? '').split('\n').filter((l) => l !== '');
  t.expect(got.length === want.length, `${String(want.length)} lines, as the README shows`, got.join('\n'));
  want.forEach((w, i) => t.expect(outputPattern(w).test(got[i] ?? ''), `line ${String(i + 1)}: ${clip(w, 110)}`, got[i] ?? '(missing)'));
} catch (err) {
  t.fail('the walkthrough ran to its end', err instanceof Error ? (err.stack ?? err.message) : String(err));
} finally {
  if (serve !== undefined && serve.exitCode === null) {
    const s = serve;
    await new Promise<void>((r) => {
      const timer = setTimeout(() => s.kill('SIGKILL'), 10_000);
      s.once('exit', () => {
        clearTimeout(timer);
        r();
      });
      s.kill('SIGTERM');
    });
  }
  if (KEEP) t.note(`kept: ${root} (HOME, the audit log) and ${project}`);
  else {
    rmSync(root, { recursive: true, force: true });
    rmSync(project, { recursive: true, force: true });
  }
}
process.exit(t.finish());

/** until polls ok every 100 ms; it throws when dead() or the time runs out. */
async function until(ok: () => boolean, ms: number, dead: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + ms;
  while (!ok()) {
    if (dead()) throw new Error(`gatekeeper serve exited before it ${what}:\n${serveOut}`);
    if (Date.now() > deadline) throw new Error(`not within ${String(ms / 1000)} s: ${what}:\n${serveOut}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

/** firstDifference says where two texts part, for a failure message. */
function firstDifference(a: string, b: string): string {
  const al = a.split('\n');
  const bl = b.split('\n');
  for (let i = 0; i < Math.max(al.length, bl.length); i++) {
    if (al[i] !== bl[i]) return `line ${String(i + 1)}:\n  README:  ${al[i] ?? '(none)'}\n  shipped: ${bl[i] ?? '(none)'}`;
  }
  return '';
}
