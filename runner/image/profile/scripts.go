package profile

import _ "embed"

// The shell of the recipes. Each runs as root (sh -eu) in the root file
// system being built, with /proc, /dev, the build's apt sources and apt's
// caches mounted by the builder; HOME is /root. They must not write to
// /etc/apt/sources.list, /etc/resolv.conf, /var/cache/apt or
// /var/lib/apt/lists: those are the builder's mounts.

// baseSetup configures apt and dpkg in the base (debootstrap's minbase),
// so that no later layer unpacks documentation, manuals, translations,
// headers or static libraries, and brings the base up to date with the
// security suite.
const baseSetup = `cat >/etc/apt/apt.conf.d/90gatekeeper <<'EOF'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Acquire::Languages "none";
EOF
cat >/etc/dpkg/dpkg.cfg.d/90gatekeeper <<'EOF'
path-exclude=/usr/share/doc/*
path-include=/usr/share/doc/*/copyright
path-exclude=/usr/share/man/*
path-exclude=/usr/share/info/*
path-exclude=/usr/share/locale/*
path-exclude=/usr/share/lintian/*
path-exclude=/usr/include/*
path-exclude=/usr/lib/*.a
EOF
printf 'sandbox\n' >/etc/hostname
apt-get update -q
apt-get upgrade -y -q
mkdir -p /workspace /deps
chmod 0755 /workspace /deps`

// Finish ends every layer: it drops what the sandbox never reads (what
// dpkg's excludes did not keep out, logs, the test suites of Python
// packages) and compiles every Python module of the system, so that no
// import compiles at run time (the root is read-only: nothing could be
// cached) and no __pycache__ is ever written there.
const Finish = `rm -rf /usr/share/man/* /usr/share/info/* /usr/share/locale/* /usr/share/lintian/*
find /usr/share/doc -mindepth 1 ! -type d ! -name copyright -delete
find /usr/share/doc -mindepth 1 -depth -type d -empty -delete
rm -rf /var/log/* /var/cache/debconf/*-old /var/lib/dpkg/*-old /tmp/* /var/tmp/* /root/.cache /root/.config /root/.npm
if [ -d /usr/lib/python3/dist-packages ]; then
  find /usr/lib/python3/dist-packages -depth -type d -name tests -exec rm -rf {} +
fi
jobs=0
python3 -c 'import concurrent.futures' 2>/dev/null || jobs=1
for d in /usr/lib/python3.11 /usr/lib/python3/dist-packages; do
  if [ -d "$d" ]; then python3 -m compileall -q -j "$jobs" "$d" >/dev/null; fi
done`

// pythonSetup configures pip for a read-only root and HOME=/workspace.
// pip reads sys.prefix/pip.conf as its "site" file: /usr/pip.conf applies
// to the system interpreter only, whose site-packages are read-only, so
// there installs go to the user site ($HOME/.local, visible to the next
// run of the query) past Debian's PEP 668 marker; a venv has a prefix of
// its own and installs into itself. /etc/pip.conf applies everywhere: no
// cache (it would fill the workspace), no version check against an index,
// no warning that $HOME/.local/bin is not on PATH (it is noexec anyway:
// run tools as python3 -m NAME), and one retry instead of five, so that an
// install the egress proxy refuses fails in a second, not eight.
const pythonSetup = `cat >/usr/pip.conf <<'EOF'
# gatekeeper: the system interpreter's root is read-only; install to the
# user site ($HOME/.local) past Debian's EXTERNALLY-MANAGED marker.
[global]
break-system-packages = true
[install]
user = true
EOF
cat >/etc/pip.conf <<'EOF'
[global]
no-cache-dir = true
disable-pip-version-check = true
retries = 1
[install]
no-warn-script-location = true
EOF`

// dataPurge are the packages python-data's Debian dependencies drag in
// that nothing uses at run time: scipy depends on pythran, which brings
// the C and C++ compilers, Boost and the Python headers (there is nothing
// to compile with, and /workspace and /tmp are noexec); matplotlib on Tk
// (there is no display; the backend is Agg); fonttools on SymPy, the
// Unicode database, lxml and ICU; numpy's pthread OpenBLAS, replaced by
// the serial one. About 450 MB.
var dataPurge = []string{
	"gcc-12", "g++-12", "cpp-12", "gcc", "g++", "cpp",
	"binutils", "binutils-common", "binutils-x86-64-linux-gnu", "libbinutils", "libctf0", "libctf-nobfd0", "libgprofng0", "libjansson4",
	"libgcc-12-dev", "libstdc++-12-dev", "libc6-dev", "libc-dev-bin", "linux-libc-dev", "libcrypt-dev", "libnsl-dev", "libtirpc-dev", "rpcsvc-proto",
	"libasan8", "libtsan2", "liblsan0", "libubsan1", "libitm1", "libcc1-0", "libisl23", "libmpc3", "libmpfr6",
	"libboost1.74-dev", "libboost-dev", "libopenblas-pthread-dev", "libopenblas-dev", "libopenblas0-pthread", "libxsimd-dev",
	"python3-pythran", "python3-beniget", "python3-gast", "python3-ply",
	"libpython3.11-dev", "libpython3-dev", "python3.11-dev", "python3-dev", "python3-all-dev", "libpython3-all-dev", "python3-all",
	"libexpat1-dev", "zlib1g-dev",
	"python3-tk", "python3-pil.imagetk", "tk8.6-blt2.5", "blt", "libtk8.6", "libtcl8.6", "libxft2", "libxss1",
	"python3-sympy", "python3-mpmath", "unicode-data", "python3-lxml", "libxslt1.1", "libxml2", "libicu72",
}

// dataSetup sets matplotlib's backend to Agg and gives it a configuration
// and cache directory in the image: matplotlib would otherwise make
// $HOME/.config/matplotlib and $HOME/.cache/matplotlib in the workspace
// and build its font list there on the first import. A few lines added to
// matplotlib make it use /var/cache/matplotlib (read-only at run time,
// its font list built here) unless MPLCONFIGDIR is set or the program
// made its own directory. And it drops matplotlib's namespace .pth: it
// imports mpl_toolkits (a regular package here) at every start of every
// Python process, doubling the interpreter's start.
const dataSetup = `sed -i 's/^backend *:.*$/backend: Agg/' /etc/matplotlibrc
grep -qx 'backend: Agg' /etc/matplotlibrc
init=$(python3 -c 'import importlib.util; print(importlib.util.find_spec("matplotlib").origin)')
python3 - "$init" <<'EOF'
import sys
path = sys.argv[1]
src = open(path).read()
anchor = "def _get_config_or_cache_dir(xdg_base_getter):\n"
patch = """    # gatekeeper: HOME is the sandbox's workspace. Unless MPLCONFIGDIR is
    # set or the program made its own directory, use the image's read-only
    # /var/cache/matplotlib, whose font list was built with the image, so
    # that importing matplotlib neither rebuilds it nor writes into HOME.
    if not os.environ.get('MPLCONFIGDIR') and os.path.isdir('/var/cache/matplotlib'):
        try:
            own = Path(xdg_base_getter(), 'matplotlib').is_dir()
        except Exception:
            own = False
        if not own:
            return '/var/cache/matplotlib'
"""
if src.count(anchor) != 1:
    sys.exit("matplotlib: %r is not in %s once" % (anchor, path))
open(path, "w").write(src.replace(anchor, anchor + patch))
EOF
mkdir -p /var/cache/matplotlib
MPLCONFIGDIR=/var/cache/matplotlib python3 -c 'from matplotlib import font_manager; font_manager.findfont("DejaVu Sans", fallback_to_default=False)'
ls /var/cache/matplotlib/fontlist-*.json >/dev/null
chmod -R a+rX /var/cache/matplotlib
test -f /usr/lib/python3/dist-packages/mpl_toolkits/__init__.py
rm /usr/lib/python3/dist-packages/matplotlib-*-nspkg.pth`

// npmClosure finds the module directories npm can load; npmPurge turns
// them into the packages the node profile purges (see npm-purge.py).
//
//go:embed npm-closure.js
var npmClosure string

//go:embed npm-purge.py
var npmPurge string

// nodeSetup purges the packages npm's Debian dependencies drag in that
// neither Node nor npm loads (webpack, babel, eslint, the C headers: about
// 60 MB), computed from what is installed rather than listed, then
// configures npm through its global npmrc: the cache in /tmp (not in the
// workspace), and no update notifier, audit or funding requests, which
// would reach for the registry on every command.
var nodeSetup = `cat >/tmp/npm-closure.js <<'GK_EOF'
` + npmClosure + `GK_EOF
cat >/tmp/npm-purge.py <<'GK_EOF'
` + npmPurge + `GK_EOF
purge=$(python3 /tmp/npm-purge.py /tmp/npm-closure.js)
test -n "$purge"
dpkg --purge --force-depends $purge
test "$(npm config get globalconfig)" = /etc/npmrc
cat >/etc/npmrc <<'EOF'
cache=/tmp/.npm
update-notifier=false
audit=false
fund=false
EOF
npm --version >/dev/null`
