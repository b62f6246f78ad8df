// Workload 2: a multi-file calculator package. The model writes the
// package and its tests in one run (the run tool's files), and runs pytest
// over them in the next run of the query, from the workspace the first run
// left; the JUnit report comes back as a file.

import { expectRan, RUN } from '../lib/agent.js';
import { CALC_TESTS, CALC_VERSION, calcPackage, calcTests } from './calc.js';
import { fileText, ranOk, type Workload } from './lib.js';

export const calculator: Workload = {
  n: 2,
  name: 'calculator package + pytest',
  about: [
    'Run 1 writes a four-module package and its pytest suite into /workspace and imports it;',
    `run 2 (same query) runs pytest over what run 1 left: ${String(CALC_TESTS)} tests must pass (python-data).`,
  ],
  async run(c) {
    const w = await c.world({ policy: { image: 'python-data', timeout: '60s' } });
    let passed = '';
    await c.agent(w, [
      {
        say: 'the model writes the package and its tests, and tries it',
        call: {
          name: RUN,
          input: {
            language: 'python',
            code: 'import calc\nprint(calc.__version__, calc.evaluate("6*7"), calc.evaluate("1/3 + 1/6"))',
            files: { ...calcPackage(), ...calcTests() },
          },
        },
        check: (o, t) => {
          expectRan(t, o);
          const r = ranOk(t, o);
          t.expect(r?.stdout === `${CALC_VERSION} 42 1/2\n`, `the package imports and evaluates: "${CALC_VERSION} 42 1/2"`, JSON.stringify(r?.stdout));
          t.expect(r?.workspace === 'saved', 'the workspace was saved for the next run', JSON.stringify(r?.workspace));
        },
      },
      {
        say: 'the model runs the test suite, in the next run, over the files the first left',
        call: { name: RUN, input: { language: 'sh', code: 'ls calc/*.py tests/*.py && python3 -m pytest -q --junitxml=reports/junit.xml' } },
        check: (o, t) => {
          const r = ranOk(t, o);
          const out = r?.stdout ?? '';
          const sources = [...Object.keys(calcPackage()), ...Object.keys(calcTests())].sort();
          t.expect(out.startsWith(`${sources.join('\n')}\n`), 'the package and tests of run 1 are in the workspace', out.slice(0, 300));
          // The summary line: "20 passed in 0.16s", with no ", 1 failed".
          const m = /^(\d+) passed in [\d.]+s$/m.exec(out);
          passed = m?.[1] ?? '?';
          t.expect(passed === String(CALC_TESTS), `pytest: ${String(CALC_TESTS)} passed, none failed`, out.slice(-600));
          const junit = fileText(r, 'reports/junit.xml') ?? '';
          t.expect(
            new RegExp(`<testsuite [^>]*errors="0" failures="0" skipped="0" tests="${String(CALC_TESTS)}"`).test(junit),
            `the JUnit report came back as a file: tests="${String(CALC_TESTS)}" failures="0" errors="0"`,
            junit.slice(0, 400),
          );
          t.expect((junit.match(/<testcase /g) ?? []).length === CALC_TESTS, `it lists ${String(CALC_TESTS)} test cases`);
        },
      },
    ], { tag: 'w2', prompt: 'Write a calculator package with tests and run them.', timeoutMs: 240_000 });
    return `pytest: ${passed} of ${String(CALC_TESTS)} passed`;
  },
};
