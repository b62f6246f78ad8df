# npm-purge.py CLOSURE_JS: print the installed Debian packages of Node.js
# modules that neither Node itself nor npm can load, for the node profile
# to purge. Debian's npm depends on far more than npm loads (webpack, babel
# and eslint arrive through node-css-loader, which provides cssesc; the
# C headers through node-gyp, which can compile nothing here). Kept:
# the dpkg dependency closure of nodejs (Debian unbundles undici, acorn and
# cjs-module-lexer from Node), npm, and the owner of every module
# directory CLOSURE_JS finds from npm. Candidates are only node-* and
# libjs-* packages and the development packages named below.
import glob
import os
import re
import subprocess
import sys

installed, deps, provides = set(), {}, {}
for stanza in open("/var/lib/dpkg/status").read().split("\n\n"):
    f = dict(re.findall(r"^([A-Za-z-]+): (.*)$", stanza, re.M))
    if "Package" not in f or "install ok installed" not in f.get("Status", ""):
        continue
    p = f["Package"]
    installed.add(p)
    deps[p] = [
        [re.split(r"[ (:]", a.strip())[0] for a in alt.split("|")]
        for key in ("Depends", "Pre-Depends")
        for alt in f.get(key, "").split(",")
        if alt.strip()
    ]
    for v in f.get("Provides", "").split(","):
        if v.strip():
            provides.setdefault(re.split(r"[ (]", v.strip())[0], set()).add(p)


def closure(roots):
    seen, todo = set(), list(roots)
    while todo:
        p = todo.pop()
        if p in seen or p not in installed:
            continue
        seen.add(p)
        for alt in deps.get(p, []):
            for name in alt:
                found = [name] if name in installed else sorted(provides.get(name, set()) & installed)
                if found:
                    todo.append(found[0])
                    break
    return seen


owners = {}
for lst in glob.glob("/var/lib/dpkg/info/*.list"):
    pkg = os.path.basename(lst)[: -len(".list")].split(":")[0]
    for line in open(lst):
        owners.setdefault(line.rstrip("\n"), pkg)
dirs = subprocess.run(["node", sys.argv[1], "/usr/share/nodejs/npm"], capture_output=True, text=True, check=True).stdout.split()
if "/usr/share/nodejs/npm" not in dirs:
    sys.exit("npm-closure.js did not start from npm")
keep = closure(["nodejs"]) | {"npm"} | {owners[d] for d in dirs if d in owners}
named = {"libnode-dev", "libssl-dev", "libuv1-dev", "libc-ares-dev", "libbrotli-dev", "libnghttp2-dev", "zlib1g-dev", "libicu-dev", "gyp", "eslint", "webpack", "terser", "handlebars", "uglifyjs"}
candidates = {p for p in installed if p.startswith(("node-", "libjs-")) or p in named}
print(" ".join(sorted(candidates - keep)))
