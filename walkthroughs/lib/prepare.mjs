// Makes sure @gatekeeper/client is built before the walkthroughs compile
// against it: `make test` builds ts-client first, but `npm run all` on its
// own must work too. Builds ts-client (installing its dev dependencies
// first if needed) when its dist/ is missing or older than a source file.
import { execFileSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const client = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'ts-client');
/** newest is the latest modification time of a file below dir. */
function newest(dir) {
  let t = 0;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}
const built = (p) => (existsSync(p) ? statSync(p).mtimeMs : -1);
const dist = Math.min(built(join(client, 'dist', 'index.js')), built(join(client, 'dist', 'testing', 'index.js')));
if (dist < newest(join(client, 'src'))) {
  console.log(`walkthroughs: building @gatekeeper/client in ${client}`);
  const run = (...args) => execFileSync('npm', args, { cwd: client, stdio: 'inherit' });
  if (!existsSync(join(client, 'node_modules', '.bin', 'tsc'))) run('ci', '--no-audit', '--no-fund', '--loglevel=error');
  run('run', 'build');
}
