// Makes sure @gatekeeper/client is built before the walkthroughs compile
// against it: `make test` builds ts-client first, but `npm run all` on its
// own must work too. Builds ts-client (installing its dev dependencies
// first if needed) only when its dist/ is missing.
import { execFileSync } from 'node:child_process';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const client = join(dirname(fileURLToPath(import.meta.url)), '..', '..', 'ts-client');
if (!existsSync(join(client, 'dist', 'index.js')) || !existsSync(join(client, 'dist', 'testing', 'index.js'))) {
  console.log(`walkthroughs: building @gatekeeper/client in ${client}`);
  const run = (...args) => execFileSync('npm', args, { cwd: client, stdio: 'inherit' });
  if (!existsSync(join(client, 'node_modules', '.bin', 'tsc'))) run('ci', '--no-audit', '--no-fund', '--loglevel=error');
  run('run', 'build');
}
