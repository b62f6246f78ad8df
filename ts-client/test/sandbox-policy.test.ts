// Pins the SandboxPolicy type (src/options.ts) to the Go policy structs it
// stands for (gate/policy's Sandbox and CodeCalls), through the real
// sidecar: the effective policy it sends at query_opened is those structs
// marshalled, so its keys under `sandbox` and `code_calls` are the Go
// fields' names. A field added on either side fails here until the other
// follows. The type's own fields are read from the source with the
// TypeScript compiler. And a code_calls override travels as the type
// spells it: a lowered bound is applied, a raised one refused.

import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { resolveConfig } from '../src/config.js';
import { Connection } from '../src/connection.js';
import type { SandboxPolicy } from '../src/options.js';
import { GatekeeperError } from '../src/protocol.js';
import { SidecarQuery } from '../src/session.js';
import { sharedWorld } from './helpers/world.js';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src/options.ts');
const shared = sharedWorld();

/** typePaths lists the dotted paths of an interface's leaf fields: a field whose type is an object literal is descended into. */
function typePaths(file: string, name: string): string[] {
  const sf = ts.createSourceFile(file, readFileSync(file, 'utf8'), ts.ScriptTarget.Latest, true);
  let decl: ts.InterfaceDeclaration | undefined;
  sf.forEachChild((n) => {
    if (ts.isInterfaceDeclaration(n) && n.name.text === name) decl = n;
  });
  assert.ok(decl, `interface ${name} in ${file}`);
  const out: string[] = [];
  const walk = (members: ts.NodeArray<ts.TypeElement>, prefix: string): void => {
    for (const m of members) {
      if (!ts.isPropertySignature(m) || m.name === undefined || !ts.isIdentifier(m.name)) continue;
      const path = `${prefix}${m.name.text}`;
      if (m.type !== undefined && ts.isTypeLiteralNode(m.type)) walk(m.type.members, `${path}.`);
      else out.push(path);
    }
  };
  walk(decl.members, '');
  return out.sort();
}

/** jsonPaths lists the dotted paths of a JSON value's leaves; an empty object or null is a leaf (a map with no entries). */
function jsonPaths(v: unknown, prefix = ''): string[] {
  if (typeof v !== 'object' || v === null || Array.isArray(v) || Object.keys(v).length === 0) return [prefix.slice(0, -1)];
  return Object.entries(v as Record<string, unknown>).flatMap(([k, x]) => jsonPaths(x, `${prefix}${k}.`));
}

async function open(override: SandboxPolicy | undefined): Promise<Record<string, unknown>> {
  const conn = new Connection(resolveConfig({ url: shared.world.sidecar.url, tokenFile: shared.world.sidecar.tokenFile, logger: {} }, {}));
  const sq = new SidecarQuery(conn, override as Record<string, unknown> | undefined);
  try {
    const first = await sq.firstOpen(5000);
    assert.equal(first.unavailable, undefined, first.unavailable);
    assert.ok(first.effectivePolicy);
    return first.effectivePolicy;
  } finally {
    await sq.close();
    conn.close();
  }
}

test('SandboxPolicy has exactly the fields of the Go sandbox and code_calls sections, as the real sidecar sends them', async () => {
  const eff = await open(undefined);
  const go = [...jsonPaths(eff.sandbox), ...jsonPaths(eff.code_calls, 'code_calls.')].sort();
  const mine = typePaths(SRC, 'SandboxPolicy');
  assert.ok(go.includes('code_calls.max_calls') && go.includes('fs.workspace.size'), `the effective policy's paths: ${go.join(', ')}`);
  assert.deepEqual(mine.sort(), go);
});

test('typePaths and jsonPaths see what they must (tests of the test)', () => {
  assert.deepEqual(jsonPaths({ a: { b: 1, c: { d: [1] } }, e: null, f: {} }), ['a.b', 'a.c.d', 'e', 'f']);
  const paths = typePaths(SRC, 'SandboxPolicy');
  for (const p of ['fs.image', 'fs.workspace.size', 'code_calls.callable', 'code_calls.timeout', 'session.idle_timeout']) assert.ok(paths.includes(p), `${p} in ${paths.join(', ')}`);
});

test('a code_calls override as the type spells it: a lowered bound applies, a raised one refuses the query naming the field', async () => {
  const eff = await open({ code_calls: { max_calls: 50, timeout: '5s' } });
  const calls = eff.code_calls as Record<string, unknown>;
  assert.equal(calls.max_calls, 50);
  assert.equal(calls.timeout, 5000);
  await assert.rejects(
    open({ code_calls: { max_calls: 100000 } }),
    (err: unknown) => err instanceof GatekeeperError && err.code === 'policy_override_rejected' && err.violations.some((v) => /code_calls\.max_calls/.test(v)),
  );
});
