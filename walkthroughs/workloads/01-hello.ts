// Workload 1: hello world, in Python and in sh, in the default profile.

import { expectRan, RUN } from '../lib/agent.js';
import type { Workload } from './lib.js';

export const hello: Workload = {
  n: 1,
  name: 'hello world',
  about: ['The model prints hello, world from Python and from sh in the default image profile (python).'],
  async run(c) {
    const w = await c.world();
    let got = '';
    await c.agent(w, [
      {
        say: 'the model runs a Python hello world',
        call: { name: RUN, input: { language: 'python', code: 'import sys\nprint("hello, world")\nprint(sys.version_info[0], file=sys.stderr)' } },
        check: (o, t) => {
          const r = expectRan(t, o);
          t.expect(r?.stdout === 'hello, world\n', 'stdout is "hello, world"', JSON.stringify(r?.stdout));
          t.expect(r?.stderr === '3\n', 'stderr is the interpreter\'s major version, 3', JSON.stringify(r?.stderr));
          t.expect(r?.exit_code === 0 && r.reason === 'exited', 'exit 0');
          t.expect(/^gatekeeper-sandbox:python-[0-9a-f]+$/.test(o.run?.image ?? ''), 'it ran in the python profile\'s image', String(o.run?.image));
          got = r?.stdout.trim() ?? '';
        },
      },
      {
        say: 'the model runs a shell hello world',
        call: { name: RUN, input: { language: 'sh', code: 'printf "%s, %s\\n" hello world; id -u' } },
        check: (o, t) => {
          const r = expectRan(t, o);
          t.expect(r?.stdout === 'hello, world\n65534\n', 'stdout is "hello, world" and the sandbox user, 65534', JSON.stringify(r?.stdout));
        },
      },
    ], { tag: 'w1', prompt: 'Say hello, world from Python and from sh.' });
    return `"${got}" (python, sh)`;
  },
};
