package docker

import (
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/image"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
)

// These tests run what models commonly run in each profile's image, under
// the same lockdown as every run (read-only root, uid 65534, no network,
// noexec /workspace and /tmp); the conformance suite re-checks the
// lockdown itself per profile.

// runInProfile runs code in profile's image under runc with the suite's
// sandbox, a 64 MiB workspace and a minute.
func runInProfile(t *testing.T, name string, lang runner.Language, code string, edit func(*runner.Spec)) runner.Result {
	t.Helper()
	img, ok := profileImages[name]
	if !ok {
		t.Fatalf("no image of profile %s", name)
	}
	spec := runnertest.Spec(code)
	spec.Language = lang
	spec.Timeout = time.Minute
	spec.Sandbox.Image = img
	spec.Sandbox.WorkspaceBytes = 64 << 20
	spec.Sandbox.TmpBytes = 64 << 20
	if edit != nil {
		edit(&spec)
	}
	res, err := newTestRunner(t).Run(t.Context(), spec)
	if err != nil {
		t.Fatalf("run in %s: %v", name, err)
	}
	return res
}

func wantRun(t *testing.T, res runner.Result, stdout string) {
	t.Helper()
	if res.Reason != runner.Exited || res.ExitCode != 0 || res.Stdout != stdout {
		t.Errorf("ended %s with %d after %s\nstdout %q\nwant   %q\nstderr %q", res.Reason, res.ExitCode, res.Duration, res.Stdout, stdout, res.Stderr)
	}
}

// stdlibProgram imports the standard-library modules a model commonly
// uses and does a little real work with each.
const stdlibProgram = `import json, csv, io, urllib.request, urllib.parse, http.client, sqlite3, decimal, statistics, zipfile, gzip
import xml.etree.ElementTree as ET, unittest, asyncio, multiprocessing, shutil, dataclasses, uuid, datetime, re, pathlib, subprocess, zoneinfo
out = []
out.append(json.loads(json.dumps({"a": [1, 2]}))["a"][1])
rows = list(csv.DictReader(io.StringIO("x,y\n1,2\n3,4\n")))
out.append(sum(int(r["y"]) for r in rows))
out.append(urllib.parse.urlparse(urllib.request.Request("http://example.invalid/p?q=1").full_url).query)
out.append(http.client.responses[404])
db = sqlite3.connect(":memory:")
db.execute("create table t (n int)")
db.executemany("insert into t values (?)", [(i,) for i in range(10)])
out.append(db.execute("select sum(n) from t").fetchone()[0])
out.append(str(decimal.Decimal("0.1") + decimal.Decimal("0.2")))
out.append(statistics.median([5, 1, 3]))
p = pathlib.Path("/workspace/a.zip")
with zipfile.ZipFile(p, "w") as z:
    z.writestr("x.txt", "zipped")
out.append(zipfile.ZipFile(p).read("x.txt").decode())
out.append(gzip.decompress(gzip.compress(b"gz")).decode())
out.append(ET.fromstring("<r><c n='7'/></r>").find("c").get("n"))
class T(unittest.TestCase):
    def test_ok(self):
        self.assertEqual(1 + 1, 2)
result = unittest.TextTestRunner(stream=io.StringIO()).run(unittest.defaultTestLoader.loadTestsFromTestCase(T))
out.append(result.wasSuccessful())
async def twice(x):
    await asyncio.sleep(0)
    return 2 * x
out.append(asyncio.run(twice(21)))
shutil.copy(p, "/workspace/b.zip")
out.append(pathlib.Path("/workspace/b.zip").exists())
@dataclasses.dataclass
class P:
    x: int
out.append(P(3).x)
out.append(uuid.uuid4().version)
out.append(datetime.datetime(2024, 1, 1, tzinfo=zoneinfo.ZoneInfo("Europe/Paris")).utcoffset().seconds)
out.append(re.sub(r"\d", "#", "a1b2"))
out.append(subprocess.run(["echo", "sub"], capture_output=True, text=True).stdout.strip())
out.append(multiprocessing.cpu_count() > 0)
print(out)
`

const stdlibOutput = "[2, 6, 'q=1', 'Not Found', 45, '0.3', 3, 'zipped', 'gz', '7', True, 42, True, 3, 4, 3600, 'a#b#', 'sub', True]\n"

func TestProfileStandardLibrary(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	// node carries the python profile: sh and python runs work there too.
	for _, name := range []string{"python", "python-data", "node"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantRun(t, runInProfile(t, name, runner.Python, stdlibProgram, nil), stdlibOutput)
		})
	}
	t.Run("minimal has the core interpreter only", func(t *testing.T) {
		t.Parallel()
		res := runInProfile(t, "minimal", runner.Python, "import json", nil)
		if res.ExitCode != 1 || !strings.Contains(res.Stderr, "No module named 'json'") {
			t.Errorf("import json in minimal: exit %d, stderr %q; want ModuleNotFoundError", res.ExitCode, res.Stderr)
		}
	})
}

func TestProfileCommands(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	// The commands a model's shell lines call by their everyday names.
	for _, tc := range []struct{ profile, code, stdout string }{
		{"python", `python -c 'print(6 * 7)' && pip --version | cut -d' ' -f1`, "42\npip\n"},
		{"python-data", `python -c 'import pandas; print(6 * 7)' && pytest --version 2>&1 | cut -d' ' -f1`, "42\npytest\n"},
		{"node", `python -c 'print(6 * 7)' && node -e 'console.log(6 * 7)' && npm --version | cut -d. -f1`, "42\n42\n9\n"},
	} {
		t.Run(tc.profile, func(t *testing.T) {
			t.Parallel()
			wantRun(t, runInProfile(t, tc.profile, runner.Shell, tc.code, nil), tc.stdout)
		})
	}
}

// bytecodeCheck reports every imported module under /usr whose bytecode
// is missing or older than its source: such a module would be compiled on
// every import (the root is read-only, nothing can be cached).
const bytecodeCheck = `
import importlib.util, os, sys
bad = []
for m in list(sys.modules.values()):
    f = getattr(m, "__file__", None)
    if not f or not f.startswith("/usr/") or not f.endswith(".py"):
        continue
    pyc = importlib.util.cache_from_source(f)
    try:
        with open(pyc, "rb") as fh:
            head = fh.read(16)
    except OSError:
        bad.append(f)
        continue
    if int.from_bytes(head[8:12], "little") != int(os.stat(f).st_mtime):
        bad.append(f)
print("modules without current bytecode:", bad[:5], len(bad))
`

func TestProfileDataStack(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	code := `import numpy as np, pandas as pd, matplotlib, scipy, requests, pytest, jinja2, markdown, yaml, os, subprocess
from scipy import optimize, stats
import matplotlib.pyplot as plt
a = np.array([[2.0, 1.0], [1.0, 3.0]])
print("numpy", np.allclose(a @ np.linalg.inv(a), np.eye(2)))
df = pd.DataFrame({"k": ["a", "b", "a"], "v": [1, 2, 3]})
print("pandas", df.groupby("k")["v"].sum().to_dict())
fig, ax = plt.subplots()
ax.plot([1, 2, 3], [1, 4, 9])
fig.savefig("/workspace/chart.png")
with open("/workspace/chart.png", "rb") as f:
    print("matplotlib", matplotlib.get_backend(), matplotlib.get_cachedir(), f.read(8) == b"\x89PNG\r\n\x1a\n")
print("scipy", round(float(optimize.minimize(lambda x: (x[0] - 3) ** 2, [0.0]).x[0]), 3), stats.norm.cdf(0))
print("requests", requests.Request("GET", "http://example.invalid/", params={"q": "a b"}).prepare().url)
open("/workspace/test_calc.py", "w").write("def test_add():\n    assert 1 + 1 == 2\n")
r = subprocess.run(["python3", "-m", "pytest", "-q", "-p", "no:cacheprovider", "test_calc.py"], capture_output=True, text=True, cwd="/workspace")
print("pytest", r.returncode, r.stdout.strip().splitlines()[-1].split(" in ")[0])
print("jinja2", jinja2.Template("{{ n }} items").render(n=3))
print("markdown", markdown.markdown("# Title"))
print("yaml", yaml.safe_load("a: [1, 2]"))
print("workspace", sorted(os.listdir("/workspace")))
` + bytecodeCheck
	// Nothing but the program's own files lands in /workspace: matplotlib
	// reads its font list from the image. (pytest caches the bytecode of
	// the test it rewrote in /workspace/__pycache__, as Python does for a
	// program's own modules.)
	res := runInProfile(t, "python-data", runner.Python, code, func(s *runner.Spec) { s.Sandbox.MemoryBytes = 512 << 20 })
	wantRun(t, res, `numpy True
pandas {'a': 4, 'b': 2}
matplotlib agg /var/cache/matplotlib True
scipy 3.0 0.5
requests http://example.invalid/?q=a+b
pytest 0 1 passed
jinja2 3 items
markdown <h1>Title</h1>
yaml {'a': [1, 2]}
workspace ['__pycache__', 'chart.png', 'main.py', 'test_calc.py']
modules without current bytecode: [] 0
`)
	if res.Stderr != "" {
		t.Errorf("stderr %q, want none (no matplotlib cache warning)", res.Stderr)
	}
}

func TestProfileBytecode(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	code := `import json, csv, sqlite3, decimal, asyncio, email.message, http.server, logging.handlers, unittest, venv, ensurepip, pip._internal.cli.main` + bytecodeCheck
	for _, name := range []string{"python", "node"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantRun(t, runInProfile(t, name, runner.Python, code, nil), "modules without current bytecode: [] 0\n")
		})
	}
}

// wheelProgram builds a pure-Python wheel of package demo in the
// workspace, as a model might have one passed in.
const wheelProgram = `import base64, hashlib, zipfile
files = {
    "demo/__init__.py": "VALUE = 42\n",
    "demo-1.0.dist-info/METADATA": "Metadata-Version: 2.1\nName: demo\nVersion: 1.0\n",
    "demo-1.0.dist-info/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n",
}
record = []
for name, text in files.items():
    digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
    record.append(f"{name},sha256={digest},{len(text.encode())}")
record.append("demo-1.0.dist-info/RECORD,,")
files["demo-1.0.dist-info/RECORD"] = "\n".join(record) + "\n"
with zipfile.ZipFile("/workspace/demo-1.0-py3-none-any.whl", "w") as z:
    for name, text in files.items():
        z.writestr(name, text)
`

func TestProfilePip(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	code := wheelProgram + `import os, subprocess, sys
def run(*argv):
    r = subprocess.run(argv, capture_output=True, text=True, cwd="/workspace")
    return r.returncode, (r.stdout + r.stderr).strip().splitlines()[-1:]
# A plain pip install goes to the user site: /usr/pip.conf says so.
print("install", run(sys.executable, "-m", "pip", "install", "--no-index", "/workspace/demo-1.0-py3-none-any.whl")[0])
print("import", run(sys.executable, "-c", "import demo; print(demo.VALUE, demo.__file__)"))
print("workspace", sorted(os.listdir("/workspace")))
# A venv installs into itself; its scripts cannot run from noexec /workspace.
print("venv", run(sys.executable, "-m", "venv", "/workspace/venv")[0])
print("venv install", run("/workspace/venv/bin/python", "-m", "pip", "install", "--no-index", "/workspace/demo-1.0-py3-none-any.whl")[0])
print("venv import", run("/workspace/venv/bin/python", "-c", "import demo, sys; print(demo.VALUE, sys.prefix)"))
try:
    subprocess.run(["/workspace/venv/bin/pip", "--version"])
except PermissionError as e:
    print("venv/bin/pip", e.strerror)
`
	for _, name := range []string{"python", "python-data"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res := runInProfile(t, name, runner.Python, code, func(s *runner.Spec) { s.Timeout = 2 * time.Minute })
			wantRun(t, res, `install 0
import (0, ['42 /workspace/.local/lib/python3.11/site-packages/demo/__init__.py'])
workspace ['.local', 'demo-1.0-py3-none-any.whl', 'main.py']
venv 0
venv install 0
venv import (0, ['42 /workspace/venv'])
venv/bin/pip Permission denied
`)
		})
	}
}

// TestProfileNativeCode pins what the noexec /workspace and /tmp mean for
// code installed at run time: a compiled extension module copied there
// cannot be loaded (the kernel refuses to map it executable), while the
// same module loads from the image.
func TestProfileNativeCode(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	code := `import glob, importlib.util, shutil
src = sorted(glob.glob("/usr/lib/python3.11/lib-dynload/_sqlite3.*.so"))[0]
for d in ["/usr/lib/python3.11/lib-dynload", "/workspace", "/tmp"]:
    path = shutil.copy(src, d) if d != "/usr/lib/python3.11/lib-dynload" else src
    spec = importlib.util.spec_from_file_location("_sqlite3", path)
    try:
        spec.loader.exec_module(importlib.util.module_from_spec(spec))
        print(d, "loaded")
    except ImportError as e:
        print(d, "refused:", "failed to map segment" in str(e))
`
	wantRun(t, runInProfile(t, "python", runner.Python, code, nil), "/usr/lib/python3.11/lib-dynload loaded\n/workspace refused: True\n/tmp refused: True\n")
}

func TestProfileMultiprocessing(t *testing.T) {
	t.Parallel()
	code := `import multiprocessing, concurrent.futures
def square(n):
    return n * n
if __name__ == "__main__":
    with multiprocessing.Pool(4) as pool:
        print("pool", sum(pool.map(square, range(20))))
    with concurrent.futures.ProcessPoolExecutor(4) as ex:
        print("executor", sum(ex.map(square, range(20))))
`
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			requireRuntime(t, rt)
			res := runInProfile(t, "python", runner.Python, code, func(s *runner.Spec) {
				s.Sandbox.Runtime = rt
				s.Sandbox.PIDs = 32 // the pool's 4 workers and their threads fit; a fork bomb would not
			})
			wantRun(t, res, "pool 2470\nexecutor 2470\n")
		})
	}
}

// TestProfileNode runs Node and the npm commands that work offline as the
// sandbox user, read-only root and all: the npm packages the image
// purged (see the node profile) must not be missed by any of them.
func TestProfileNode(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	code := `set -e
node -e 'console.log(6 * 7, typeof fetch)'
node --input-type=module -e 'import fs from "fs"; console.log("esm", typeof fs.readFileSync)'
npm --version
npm config get cache
mkdir demo && cd demo
printf '{"name":"demo","version":"1.0.0","main":"index.js","scripts":{"test":"echo tested"}}\n' >package.json
echo 'module.exports = 42;' >index.js
npm test --silent
npm pack --silent
cd .. && mkdir app && cd app
npm init -y >/dev/null
npm install --offline ../demo/demo-1.0.0.tgz >/dev/null
node -e 'console.log("required", require("demo"))'
npm ls --parseable --depth=0
npm query '#demo' | grep -c '"name": "demo"'
cd /workspace && ls -A
`
	// npm takes seconds per command on a loaded machine: three minutes.
	res := runInProfile(t, "node", runner.Shell, code, func(s *runner.Spec) {
		s.Sandbox.MemoryBytes = 512 << 20
		s.Timeout = 3 * time.Minute
	})
	want := regexp.MustCompile(`^42 function\nesm function\n\d+\.\d+\.\d+\n/tmp/\.npm\ntested\ndemo-1\.0\.0\.tgz\nrequired 42\n/workspace/app\n/workspace/app/node_modules/demo\n1\napp\ndemo\nmain\.sh\n$`)
	if res.ExitCode != 0 || !want.MatchString(res.Stdout) {
		t.Errorf("node profile: %s with %d (%s)\nstdout %q\nstderr %q\nwant stdout matching %s", res.Reason, res.ExitCode, res.Duration, res.Stdout, res.Stderr, want)
	}
	if out := res.Stdout + res.Stderr; strings.Contains(out, "update") || strings.Contains(out, "fund") {
		t.Errorf("npm printed an update or funding notice: %q", out)
	}
}

// TestImageMissing asks the real engine which images it lacks, as the
// sidecar does at start for its policy's images.
func TestImageMissing(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	stale := "gatekeeper-sandbox:python-000000000000"
	got, err := image.Missing(t.Context(), nil, []string{profileImages["python"], stale, profileImages["node"]})
	if err != nil || len(got) != 1 || got[0] != stale {
		t.Fatalf("Missing = %v, %v; want only %s", got, err, stale)
	}
}

// TestProfileStartup: an interpreter in python-data or node starts with
// the same modules as in python (no .pth file imports anything at every
// start: matplotlib's importing mpl_toolkits would double the start).
func TestProfileStartup(t *testing.T) {
	t.Parallel()
	requireEngine(t)
	code := "import sys\nprint(sorted(sys.modules))"
	want := runInProfile(t, "python", runner.Python, code, nil)
	if want.ExitCode != 0 || !strings.Contains(want.Stdout, "'site'") {
		t.Fatalf("python: exit %d, stdout %q, stderr %q", want.ExitCode, want.Stdout, want.Stderr)
	}
	for _, name := range []string{"python-data", "node"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			wantRun(t, runInProfile(t, name, runner.Python, code, nil), want.Stdout)
		})
	}
}
