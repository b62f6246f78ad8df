// The client's modules import one another without a circle: a name two
// modules share lives in a module below both (protocol.ts holds the
// sidecar's frames, errors and the run tool's names).
import assert from 'node:assert/strict';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { test } from 'node:test';

const SRC = join(import.meta.dirname, '..', '..', 'src');

/** importsOf lists the local modules a source file imports, type-only imports included. */
function importsOf(file: string): string[] {
  const text = readFileSync(join(SRC, file), 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/^(?:import|export)\b[^;]*?from\s+'\.\/([\w-]+)\.js'/gms)) {
    out.push(`${m[1]}.ts`);
  }
  return out;
}

/** cycle returns one import circle among files, or undefined. */
function cycle(graph: Map<string, string[]>): string[] | undefined {
  const state = new Map<string, 'open' | 'done'>();
  const path: string[] = [];
  const visit = (f: string): string[] | undefined => {
    if (state.get(f) === 'done') return undefined;
    if (state.get(f) === 'open') return [...path.slice(path.indexOf(f)), f];
    state.set(f, 'open');
    path.push(f);
    for (const g of graph.get(f) ?? []) {
      const c = visit(g);
      if (c) return c;
    }
    path.pop();
    state.set(f, 'done');
    return undefined;
  };
  for (const f of graph.keys()) {
    const c = visit(f);
    if (c) return c;
  }
  return undefined;
}

test('the cycle finder finds a circle of three and none in a chain', () => {
  const circle = new Map([['a.ts', ['b.ts']], ['b.ts', ['c.ts']], ['c.ts', ['a.ts']]]);
  assert.deepEqual(cycle(circle), ['a.ts', 'b.ts', 'c.ts', 'a.ts']);
  assert.equal(cycle(new Map([['a.ts', ['b.ts']], ['b.ts', ['c.ts']], ['c.ts', []]])), undefined);
});

test("ts-client/src's modules import one another without a circle", () => {
  const files = readdirSync(SRC).filter((f) => f.endsWith('.ts'));
  assert.ok(files.includes('session.ts') && files.includes('sandboxed-code.ts'), `read ${SRC}`);
  const graph = new Map(files.map((f) => [f, importsOf(f)]));
  assert.ok((graph.get('session.ts') ?? []).includes('protocol.ts'), 'the import reader sees session.ts import protocol.ts');
  assert.equal(cycle(graph)?.join(' → '), undefined);
});
