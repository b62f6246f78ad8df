// Workload 8: a package builder. The model builds a wheel of workload 2's
// calculator package, offline (pip wheel with the image's setuptools, no
// index), and the wheel comes back to the agent builder (onSandboxRun),
// who checks it with unzip: the listing, the archive's CRCs, METADATA,
// WHEEL and every RECORD hash. The next run installs the wheel from the
// workspace with pip, and the run after that imports it without
// installing anything: pip's user site lasts the query.

import { spawnSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { SandboxFile } from '@gatekeeper/client';
import { RUN } from '../lib/agent.js';
import type { Transcript } from '../lib/transcript.js';
import { CALC_VERSION, calcPackage } from './calc.js';
import { ranOk, type Workload } from './lib.js';

const DIST = 'calc_demo';
const WHEEL = `dist/${DIST}-${CALC_VERSION}-py3-none-any.whl`;

const PYPROJECT = `[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "calc-demo"
version = "${CALC_VERSION}"
description = "A small exact calculator"
requires-python = ">=3.9"

[tool.setuptools]
packages = ["calc"]
`;

/**
 * unzip runs `unzip OPTION FILE [MEMBER]` and returns its output, also
 * when it exits non-zero (a damaged archive): then stderr follows stdout.
 */
function unzip(option: string, file: string, member?: string): Buffer {
  const r = spawnSync('unzip', [option, file, ...(member === undefined ? [] : [member])], { maxBuffer: 1 << 26 });
  if (r.error !== undefined) throw new Error(`unzip: ${r.error.message} (make workloads installs it)`);
  return r.status === 0 ? r.stdout : Buffer.concat([r.stdout, r.stderr, Buffer.from(`\n(unzip exited ${String(r.status)})`)]);
}
const unzipText = (option: string, file: string, member?: string): string => unzip(option, file, member).toString('utf8');

/** checkWheel checks the wheel's bytes with unzip; it returns the names in it. */
function checkWheel(t: Transcript, wheel: Buffer): string[] {
  const dir = mkdtempSync(join(tmpdir(), 'gk-wl8-'));
  try {
    const file = join(dir, WHEEL.slice('dist/'.length));
    writeFileSync(file, wheel);
    const listing = unzipText('-Z1', file).split('\n').filter((l) => l !== '');
    const info = `${DIST}-${CALC_VERSION}.dist-info`;
    const want = ['calc/__init__.py', 'calc/errors.py', 'calc/ops.py', 'calc/parser.py', `${info}/METADATA`, `${info}/WHEEL`, `${info}/top_level.txt`, `${info}/RECORD`];
    t.expect(JSON.stringify([...listing].sort()) === JSON.stringify([...want].sort()), `unzip lists the package's modules and its dist-info: ${listing.join(', ')}`, listing.join('\n'));
    t.expect(/No errors detected/.test(unzipText('-t', file)), 'unzip -t: every member\'s CRC checks out');
    const metadata = unzipText('-p', file, `${info}/METADATA`);
    t.expect(metadata.includes('\nName: calc-demo\n') && metadata.includes(`\nVersion: ${CALC_VERSION}\n`), `METADATA: Name calc-demo, Version ${CALC_VERSION}`, metadata);
    const wheelInfo = unzipText('-p', file, `${info}/WHEEL`);
    t.expect(wheelInfo.includes('Root-Is-Purelib: true') && wheelInfo.includes('Tag: py3-none-any'), 'WHEEL: pure Python, py3-none-any', wheelInfo);
    const record = unzipText('-p', file, `${info}/RECORD`).split('\n').filter((l) => l !== '');
    const bad = record.flatMap((line) => {
      const [path = '', hash = '', size = ''] = line.split(',');
      if (path === `${info}/RECORD`) return hash === '' && size === '' ? [] : [`${line}: RECORD lists a hash of itself`];
      const body = unzip('-p', file, path);
      const digest = `sha256=${createHash('sha256').update(body).digest('base64url')}`;
      return digest === hash && String(body.length) === size ? [] : [`${line}: the member has ${digest},${String(body.length)}`];
    });
    t.expect(record.length === want.length && bad.length === 0, `RECORD: the hash and size of each of the ${String(want.length - 1)} other members match`, [...bad, ...record].join('\n'));
    const source = calcPackage()['calc/parser.py'] ?? '';
    t.expect(unzipText('-p', file, 'calc/parser.py') === source, 'calc/parser.py in the wheel is the source the model wrote');
    return listing;
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export const packageBuilder: Workload = {
  n: 8,
  name: 'package builder (wheel, offline)',
  about: [
    'The model builds a wheel of the calculator package offline (pip wheel, no index); the wheel comes back to the agent',
    'builder, checked with unzip (listing, CRCs, METADATA, RECORD hashes); the next runs install it from the workspace',
    'and import it from the user site that install left (python).',
  ],
  async run(c) {
    const w = await c.world({ policy: { timeout: '60s' } });
    const back = new Map<string, SandboxFile[]>();
    let members = 0;
    await c.agent(w, [
      {
        say: 'the model writes pyproject.toml and builds a wheel, with no network and no index',
        call: {
          name: RUN,
          input: {
            language: 'sh',
            code: 'python3 -m pip wheel --no-build-isolation --no-deps --no-index --wheel-dir dist . 2>&1 | tail -n 2 && ls dist',
            files: { ...calcPackage(), 'pyproject.toml': PYPROJECT },
            outputs: ['dist'],
          },
        },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect((r?.stdout ?? '').endsWith(`${WHEEL.slice('dist/'.length)}\n`), `pip built ${WHEEL}`, r?.stdout);
          const f = r?.files?.find((x) => x.path === WHEEL);
          t.expect(f !== undefined && f.change === 'created' && f.note === 'binary content, not shown', 'the model sees the wheel listed (binary, not shown)', JSON.stringify(r?.files));
          const built = back.get(o.id)?.find((x) => x.path === WHEEL);
          t.expect(built?.content !== undefined && built.content.length === built.size, 'the agent builder got the wheel\'s bytes (onSandboxRun)', JSON.stringify(back.get(o.id)?.map((x) => [x.path, x.size])));
          if (built?.content !== undefined) {
            t.expect(createHash('sha256').update(built.content).digest('hex') === built.sha256, 'their SHA-256 is the one the sidecar reported');
            members = checkWheel(t, built.content).length;
          }
        },
      },
      {
        say: 'the model installs the wheel it built, from the workspace, and imports it from outside the source tree',
        call: { name: RUN, input: { language: 'sh', code: `python3 -m pip install --no-index --no-deps ${WHEEL} 2>&1 | tail -n 1\ncd /tmp && python3 -c 'import calc; print(calc.__file__); print(calc.evaluate("2*(3+4)"))'` } },
        check: (o, t) => {
          const r = ranOk(t, o);
          const out = r?.stdout ?? '';
          t.expect(out.startsWith(`Successfully installed calc-demo-${CALC_VERSION}\n`), `pip: Successfully installed calc-demo-${CALC_VERSION}`, out);
          t.expect(/\n\/workspace\/\.local\/lib\/python3\.\d+\/site-packages\/calc\/__init__\.py\n14\n$/.test(out), 'calc is imported from the user site in /workspace/.local, and evaluates 2*(3+4) = 14', out);
        },
      },
      {
        say: 'in the next run, with nothing installed, the model imports it again',
        call: { name: RUN, input: { language: 'sh', code: `cd /tmp && python3 -m pip list --user --format=freeze && python3 -c 'import calc; print(calc.__version__)'` } },
        check: (o, t) => {
          const r = ranOk(t, o);
          t.expect(r?.stdout === `calc-demo==${CALC_VERSION}\n${CALC_VERSION}\n`, `the install lasted the query: calc-demo==${CALC_VERSION} in the user site, importable`, JSON.stringify(r?.stdout));
        },
      },
    ], {
      tag: 'w8',
      prompt: 'Build a wheel of the calculator package and install it.',
      timeoutMs: 240_000,
      onSandboxRun: (run) => void back.set(run.toolUseId, run.files),
    });
    return `${WHEEL.slice('dist/'.length)}: ${String(members)} members, RECORD verified; installed, imported`;
  },
};
