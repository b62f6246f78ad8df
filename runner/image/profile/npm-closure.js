// Print the package directories npm can load: from npm's own directory,
// every package named in a package.json's dependencies or in a literal
// require() or import of a module's files, as Node resolves it (Debian
// patches some modules to require names their package.json does not
// list), both as found and with symlinks resolved.
const path = require('path'), fs = require('fs'), { isBuiltin } = require('module');
const seen = new Set();
const refRE = /(?:require|import)\s*\(\s*['"]([^'"]+)['"]\s*\)|\bfrom\s+['"]([^'"]+)['"]/g;
function packageName(spec) {
  if (spec.startsWith('.') || spec.startsWith('/') || isBuiltin(spec)) return null;
  const parts = spec.split('/');
  return spec.startsWith('@') ? parts.slice(0, 2).join('/') : parts[0];
}
function resolveDir(name, from) {
  let file;
  try { file = require.resolve(name + '/package.json', { paths: [from] }); } catch (e) {
    try { file = require.resolve(name, { paths: [from] }); } catch (e2) { return null; }
  }
  if (!path.isAbsolute(file)) return null;
  let d = path.dirname(file);
  while (d !== '/' && !fs.existsSync(path.join(d, 'package.json'))) d = path.dirname(d);
  return d === '/' ? null : d;
}
function sources(dir, out) {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isDirectory() && e.name !== 'node_modules' && e.name !== 'test' && e.name !== 'tests') sources(p, out);
    else if (e.isFile() && /\.[cm]?js$/.test(e.name)) out.push(p);
  }
  return out;
}
function walk(dir) {
  const real = fs.realpathSync(dir);
  if (seen.has(dir) && seen.has(real)) return;
  seen.add(dir); seen.add(real);
  const names = new Set();
  try {
    const pj = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    for (const n of Object.keys({ ...pj.dependencies, ...pj.optionalDependencies, ...pj.peerDependencies })) names.add(n);
  } catch (e) {}
  for (const f of sources(real, [])) {
    for (const m of fs.readFileSync(f, 'utf8').matchAll(refRE)) {
      const n = packageName(m[1] || m[2]);
      if (n) names.add(n);
    }
  }
  for (const n of names) {
    const d = resolveDir(n, real);
    if (d) walk(d);
  }
}
walk(process.argv[2]);
for (const d of seen) console.log(d);
