package runnertest

// The adversarial suite of the sandbox: what the model's code tries from
// inside, under runc and runsc, against any backend. One probe program
// tries every case and prints "label outcome" lines; each case then
// asserts its specific outcome (an errno, a value), pinned per runtime
// where gVisor answers differently and per backend where one differs by
// design (Options). The conformance suite already covers the read-only
// root, /deps, the environment, capabilities, IPv4 connects, the pids and
// memory limits and the Docker socket; these are the escape attempts
// beyond it.

import (
	"fmt"
	goruntime "runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// advSyscalls are the system call numbers the probe calls through perl's
// syscall(), per architecture.
var advSyscalls = map[string]map[string]int{
	"amd64": {"mount": 165, "umount2": 166, "unshare": 272, "ptrace": 101, "bpf": 321, "perf_event_open": 298, "kexec_load": 246, "init_module": 175, "pivot_root": 155, "open_by_handle_at": 304, "reboot": 169, "process_vm_readv": 310, "clone3": 435},
	"arm64": {"mount": 40, "umount2": 39, "unshare": 97, "ptrace": 117, "bpf": 280, "perf_event_open": 241, "kexec_load": 104, "init_module": 105, "pivot_root": 41, "open_by_handle_at": 265, "reboot": 142, "process_vm_readv": 270, "clone3": 435},
}

// advProbe is the probe program; NR is replaced by the architecture's
// system call numbers. The image's python has no ctypes, so raw system
// calls go through perl (perl-base is in the image).
const advProbe = `import errno, os, signal, socket, stat, subprocess, time
NR = %s
PERL = r'''
use Errno;
my ($nr, @a) = @ARGV;
@a = map { /^-?\d+$/ ? $_ + 0 : $_ } @a;
my $r = syscall($nr, @a);
if ($r == -1) { my ($n) = grep { $!{$_} } sort keys %%!; print $n // ($! + 0) } else { print "ok" }
'''
def res(fn):
    try:
        fn()
        return "ok"
    except OSError as e:
        return errno.errorcode.get(e.errno, str(e))
def p(label, fn):
    print(label, res(fn))
def sysc(label, name, *args):
    out = subprocess.run(["perl", "-e", PERL, str(NR[name])] + [str(a) for a in args], capture_output=True, text=True)
    print(label, out.stdout.strip() or "perl-failed:" + out.stderr.strip().replace(" ", "_"))
def write(path, data="x"):
    return lambda: open(path, "w").write(data)

# /proc/self/exe and /proc/self/fd
p("exe:write-self", lambda: open("/proc/self/exe", "wb").close())
p("exe:write-init", lambda: open("/proc/1/exe", "wb").close())
fds = sorted(os.listdir("/proc/self/fd"), key=int)
print("fd:list", ",".join(fds))
print("fd:0", os.readlink("/proc/self/fd/0"))
print("pid:list", ",".join(sorted((d for d in os.listdir("/proc") if d.isdigit()), key=int)))

# mount, unshare, pivot_root and friends
sysc("mount:tmpfs", "mount", "none", "/tmp", "tmpfs", 0, 0)
sysc("mount:bind-root", "mount", "/", "/workspace", 0, 4096, 0)
sysc("umount:workspace", "umount2", "/workspace", 2)
sysc("pivot_root", "pivot_root", "/tmp", "/tmp")
sysc("unshare:user", "unshare", 0x10000000)
sysc("unshare:mount", "unshare", 0x00020000)
sysc("unshare:net", "unshare", 0x40000000)
p("chroot", lambda: os.chroot("/tmp"))
sysc("open_by_handle_at", "open_by_handle_at", 3, 0, 0)
sysc("bpf", "bpf", 0, 0, 0)
sysc("perf_event_open", "perf_event_open", 0, 0, -1, -1, 0)
sysc("kexec_load", "kexec_load", 0, 0, 0, 0)
sysc("init_module", "init_module", 0, 0, "")
sysc("reboot", "reboot", 0xfee1dead, 672274793, 0x4321fedc, 0)

# the seccomp filter, and threads under it: clone3 (with no arguments, so
# it can start nothing) must fail with ENOSYS, the one errno on which libc
# falls back to clone
print("seccomp:status", [l.split()[1] for l in open("/proc/self/status") if l.startswith("Seccomp:")][0])
sysc("clone3", "clone3", 0, 0)
import threading
started = []
th = threading.Thread(target=lambda: started.append(threading.get_native_id()))
p("thread:python", lambda: (th.start(), th.join()))
print("thread:ran", "yes" if started and started[0] != threading.get_native_id() else "no")
# clone3 of a user namespace by a child this program traces: the profile
# traces clone3 (see runner/seccomp), so a tracer that asks for seccomp
# stops (PTRACE_O_TRACESECCOMP) would decide the call itself. Under gVisor
# the profile refuses ptrace, so the child cannot ask to be traced and the
# parent cannot attach: with no tracer, clone3 fails with ENOSYS. (Not
# traced, the stopped child is woken with SIGCONT.)
import ctypes, struct
libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long
def cres(r):
    return "ok" if r >= 0 else errno.errorcode.get(ctypes.get_errno(), "?")
rfd, wfd = os.pipe()
child = os.fork()
if child == 0:
    os.close(rfd)
    os.write(wfd, cres(libc.ptrace(0, 0, 0, 0)).encode() + b" ")  # PTRACE_TRACEME
    os.kill(os.getpid(), signal.SIGSTOP)
    args = ctypes.create_string_buffer(struct.pack("11Q", 0x10000000, 0, 0, 0, 17, 0, 0, 0, 0, 0, 0), 88)
    r = libc.syscall(NR["clone3"], args, 88)  # CLONE_NEWUSER, SIGCHLD
    if r == 0:
        os._exit(0)
    os.write(wfd, cres(r).encode())
    os._exit(0)
os.close(wfd)
os.waitpid(child, os.WUNTRACED)
setopt = cres(libc.ptrace(0x4200, child, 0, 0x80))  # PTRACE_SETOPTIONS, PTRACE_O_TRACESECCOMP
if libc.ptrace(7, child, 0, 0) < 0:  # PTRACE_CONT
    os.kill(child, signal.SIGCONT)
for _ in range(10):
    _, st = os.waitpid(child, 0)
    if not os.WIFSTOPPED(st):
        break
    libc.ptrace(7, child, 0, 0)  # past the seccomp stop too
else:
    os.kill(child, signal.SIGKILL)
    os.waitpid(child, 0)
said = b"".join(iter(lambda: os.read(rfd, 64), b"")).decode().split()
os.close(rfd)
print("ptrace:traceme", said[0] if said else "nothing")
print("ptrace:traced-child-options", setopt)
print("clone3:traced-child-userns", said[1] if len(said) > 1 else "nothing")

# ptrace of a child of this program, by the program (its parent) and by
# perl (its sibling), each its own child
for who in ("own-child", "sibling"):
    child = subprocess.Popen(["sleep", "5"])
    if who == "own-child":
        print("ptrace:seize-own-child", cres(libc.ptrace(0x4206, child.pid, 0, 0)))  # PTRACE_SEIZE
    else:
        sysc("ptrace:sibling", "ptrace", 16, child.pid, 0, 0)  # PTRACE_ATTACH
    child.kill()
    child.wait()
sysc("ptrace:absent-pid", "ptrace", 16, 99999, 0, 0)

# the sandbox's own processes: PID 1 (init, which holds the run's tag and
# writes the end marks and the snapshot) and the launcher shell (the
# ancestor whose parent is PID 1)
def ppid(pid):
    return int(open("/proc/%%d/stat" %% pid).read().rsplit(")", 1)[1].split()[1])
def state(pid):
    return open("/proc/%%d/stat" %% pid).read().rsplit(")", 1)[1].split()[0]
launcher = os.getppid()
while ppid(launcher) != 1:
    launcher = ppid(launcher)
for who, pid in (("init", 1), ("launcher", launcher)):
    sysc("ptrace:attach-" + who, "ptrace", 16, pid, 0, 0)
    # PTRACE_ATTACH stopped it, and the tracer (perl) is gone
    os.kill(pid, signal.SIGCONT)
    p("mem:read-" + who, lambda: open("/proc/%%d/mem" %% pid, "rb").close())
p("mem:write-init", lambda: open("/proc/1/mem", "r+b").close())
p("environ:init", lambda: open("/proc/1/environ", "rb").read())
p("maps:init", lambda: open("/proc/1/maps").read())
p("fd:write-init-stdout", lambda: open("/proc/1/fd/1", "wb").close())
VM = r'''
my ($nr, $pid) = @ARGV;
my $buf = "\0" x 8;
my $local = pack("QQ", unpack("Q", pack("p", $buf)), 8);
my $remote = pack("QQ", 0x400000, 8);
my $r = syscall($nr + 0, $pid + 0, $local, 1, $remote, 1, 0);
if ($r == -1) { my ($n) = grep { $!{$_} } sort keys %%!; print $n // ($! + 0) } else { print "ok" }
'''
out = subprocess.run(["perl", "-e", VM, str(NR["process_vm_readv"]), "1"], capture_output=True, text=True)
print("process_vm_readv:init", out.stdout.strip() or "perl-failed")
# the run's tag on a command line, in an environment, or in any memory
# the program can read: the header line ("<seconds> <language> <tag>
# <snapshot>") or an end mark
import re
tagged = re.compile(rb"[0-9]+ [a-z]+ [0-9a-f]{16} [01]|gatekeeper-end [0-9a-f]{16}")
where = []
for d in sorted((d for d in os.listdir("/proc") if d.isdigit() and int(d) != os.getpid()), key=int):
    for f in ("cmdline", "environ"):
        try:
            if tagged.search(open("/proc/%%s/%%s" %% (d, f), "rb").read()):
                where.append(d + ":" + f)
        except OSError:
            pass
    try:
        regions = open("/proc/%%s/maps" %% d).read().splitlines()
        mem = open("/proc/%%s/mem" %% d, "rb")
    except OSError:
        continue
    with mem:
        for l in regions:
            lo, hi = (int(x, 16) for x in l.split()[0].split("-"))
            if "r" not in l.split()[1] or hi - lo > 64 << 20:
                continue
            try:
                mem.seek(lo)
                if tagged.search(mem.read(hi - lo)):
                    where.append(d + ":mem")
            except (OSError, OverflowError, ValueError):
                pass
print("tag:readable", ",".join(where) or "nowhere")
# signals: init has a handler for SIGALRM only (its life), and ignores it
# when it comes early; the kernel drops SIGSTOP (and SIGKILL) sent to a
# PID namespace's init from inside it
p("signal:alrm-init", lambda: os.kill(1, signal.SIGALRM))
p("signal:stop-init", lambda: os.kill(1, signal.SIGSTOP))
time.sleep(0.2)
print("signal:stop-init-state", state(1))
os.kill(1, signal.SIGCONT)

# privileges and setuid binaries
p("setuid:0", lambda: os.setuid(0))
p("setgroups:0", lambda: os.setgroups([0]))
p("chown:0", lambda: os.chown("/workspace/main.py", 0, 0))
def euid(argv):
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.3)
    try:
        st = dict(l.split(":", 1) for l in open("/proc/%%d/status" %% proc.pid).read().splitlines() if ":" in l)
        out = st["Uid"].split()[1]
    except (OSError, KeyError):
        out = "exited"
    proc.kill()
    proc.wait()
    return out
found = subprocess.run(["find", "/", "-xdev", "-type", "f", "-perm", "-4000"], capture_output=True, text=True).stdout.split()
print("setuid:found", ",".join(sorted(found)))
print("setuid:su-euid", euid(["su", "root", "-c", "true"]))
print("setuid:passwd-euid", euid(["passwd"]))

# /proc/sys and other kernel knobs
p("procsys:hostname", write("/proc/sys/kernel/hostname"))
p("procsys:core_pattern", write("/proc/sys/kernel/core_pattern", "|/tmp/x"))
p("procsys:drop_caches", write("/proc/sys/vm/drop_caches", "3"))
p("proc:sysrq-trigger", write("/proc/sysrq-trigger", "b"))
p("proc:kcore", lambda: open("/proc/kcore", "rb").read(16))

# cgroup limits: read them, try to raise them
for name, v1, v2 in [("memory", "/sys/fs/cgroup/memory/memory.limit_in_bytes", "/sys/fs/cgroup/memory.max"), ("pids", "/sys/fs/cgroup/pids/pids.max", "/sys/fs/cgroup/pids.max")]:
    path = v1 if os.path.exists(v1) else v2
    try:
        print("cgroup:%%s-read" %% name, open(path).read().strip())
    except OSError as e:
        print("cgroup:%%s-read" %% name, errno.errorcode[e.errno])
    p("cgroup:%%s-raise" %% name, write(path, "max"))

# device nodes
p("mknod:tmp-char", lambda: os.mknod("/tmp/null", stat.S_IFCHR | 0o666, os.makedev(1, 3)))
p("mknod:workspace-block", lambda: os.mknod("/workspace/sda", stat.S_IFBLK | 0o600, os.makedev(8, 0)))

# a symlink in /workspace pointing to /, and writes through it
p("symlink:create", lambda: os.symlink("/", "/workspace/root"))
p("symlink:write-etc", write("/workspace/root/etc/gatekeeper-pwned"))
p("symlink:write-passwd", write("/workspace/root/etc/passwd"))
p("symlink:write-procsys", write("/workspace/root/proc/sys/kernel/hostname"))

# noexec: a binary copied to /tmp or /workspace does not run
for d in ("/tmp", "/workspace"):
    open(d + "/true", "wb").write(open("/bin/true", "rb").read())
    os.chmod(d + "/true", 0o755)
    p("noexec:" + d.strip("/"), lambda: subprocess.run([d + "/true"]))

# IPv6 and raw sockets
def connect(family, addr):
    def f():
        s = socket.socket(family, socket.SOCK_STREAM)
        s.settimeout(3)
        try:
            s.connect(addr)
        finally:
            s.close()
    return f
p("ipv6:connect-testnet", connect(socket.AF_INET6, ("2001:db8::1", 80)))
p("ipv6:connect-loopback", connect(socket.AF_INET6, ("::1", 80)))
p("ipv6:connect-mapped-testnet", connect(socket.AF_INET6, ("::ffff:192.0.2.1", 80)))
p("raw:inet", lambda: socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP).close())
p("raw:inet6", lambda: socket.socket(socket.AF_INET6, socket.SOCK_RAW, socket.IPPROTO_ICMPV6).close())
p("raw:packet", lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW, 0).close())
print("done")
`

// advCase is one line of the probe and what it must say under each runtime.
type advCase struct {
	name, label string
	runc, runsc string // "" means the same as runc
}

func advCases(sb runner.Sandbox, o Options) []advCase {
	// What differs by backend (Options), else Docker's outcome.
	pids, noexec := strconv.FormatInt(sb.PIDs, 10), "EACCES"
	if o.PIDsByRlimit {
		pids = "max"
	}
	if o.ExecVolumes {
		noexec = "ok"
	}
	v6testnet, v6testnetRunsc, v6loopback := "EADDRNOTAVAIL", "ENETUNREACH", "EADDRNOTAVAIL"
	if o.IPv6Loopback {
		v6testnet, v6loopback = "ENETUNREACH", "ECONNREFUSED"
	}
	return []advCase{
		{"/proc/self/exe cannot be opened for writing", "exe:write-self", "EROFS", "EACCES"},
		// PID 1 is undumpable (see launch's init): its /proc links refuse
		// access before the read-only root could.
		{"/proc/1/exe (the init) cannot be opened for writing", "exe:write-init", "EACCES", ""},
		{"/proc/self/fd holds only stdin, stdout, stderr and the listing itself", "fd:list", "0,1,2,3", ""},
		{"stdin is /dev/null", "fd:0", "/dev/null", ""},
		{"mount of a tmpfs is refused", "mount:tmpfs", "EPERM", ""},
		{"a bind mount of / is refused", "mount:bind-root", "EPERM", ""},
		{"unmounting /workspace is refused", "umount:workspace", "EPERM", ""},
		{"pivot_root is refused", "pivot_root", "EPERM", ""},
		// gVisor's kernel would let a process make a user namespace; the
		// seccomp profile runsc applies inside it (runner/seccomp, with
		// --oci-seccomp) refuses it first, as Docker's default does under runc.
		{"unshare of a user namespace is refused, under gVisor too", "unshare:user", "EPERM", ""},
		{"unshare of a mount namespace is refused", "unshare:mount", "EPERM", ""},
		{"unshare of a network namespace is refused", "unshare:net", "EPERM", ""},
		{"chroot is refused", "chroot", "EPERM", ""},
		// Under gVisor too the profile answers these before gVisor's kernel
		// would (ENOTSUP, ENODEV).
		{"open_by_handle_at (the shocker escape) is refused", "open_by_handle_at", "EPERM", ""},
		{"bpf is refused", "bpf", "EPERM", ""},
		{"perf_event_open is refused", "perf_event_open", "EPERM", ""},
		// A seccomp filter, gVisor's included; its clone3 answers ENOSYS
		// (gVisor: the profile's SCMP_ACT_TRACE, as gVisor drops errnoRet
		// and would answer Docker's ENOSYS rule with EPERM), so libc falls
		// back to clone and threads start.
		{"the program runs under a seccomp filter", "seccomp:status", "2", ""},
		{"clone3 fails with ENOSYS, so libc falls back to clone", "clone3", "ENOSYS", ""},
		{"a Python thread starts", "thread:python", "ok", ""},
		{"and runs as a thread of its own", "thread:ran", "yes", ""},
		// Under gVisor the profile traces clone3 (runner/seccomp), and a
		// tracer would decide a traced child's clone3: the profile refuses
		// ptrace there, so no program can be that tracer (EPERM: runsc
		// answers every SCMP_ACT_ERRNO so). Under runc the profile answers
		// clone3 with ENOSYS, tracer or not.
		{"a child can ask to be traced under runc only", "ptrace:traceme", "ok", "EPERM"},
		{"its parent sets its tracer's options under runc only", "ptrace:traced-child-options", "ok", "EPERM"},
		{"a traced child's clone3 of a user namespace fails with ENOSYS", "clone3:traced-child-userns", "ENOSYS", ""},
		{"kexec_load is refused", "kexec_load", "EPERM", ""},
		{"init_module is refused", "init_module", "EPERM", ""},
		{"reboot is refused", "reboot", "EPERM", ""},
		// Under runc the default seccomp profile allows ptrace (kernel >= 4.8)
		// and the child has the same uid: tracing stays inside the sandbox's
		// PID namespace. Under gVisor the profile refuses it.
		{"the program can trace its own child under runc only", "ptrace:seize-own-child", "ok", "EPERM"},
		{"a sibling can trace it under runc only", "ptrace:sibling", "ok", "EPERM"},
		{"ptrace of a pid outside the sandbox finds nothing (gVisor's profile refuses it first)", "ptrace:absent-pid", "ESRCH", "EPERM"},
		// The sandbox's PID 1 (launch's init) holds the run's tag and writes
		// the end marks and the snapshot: it is undumpable, so the kernel's
		// ptrace access check refuses every way into it. The launcher shell
		// holds nothing the program does not know; under runc the program
		// can trace it, under gVisor the profile refuses ptrace.
		{"ptrace of PID 1 is refused", "ptrace:attach-init", "EPERM", ""},
		{"PID 1's memory cannot be opened for reading", "mem:read-init", "EACCES", ""},
		{"PID 1's memory cannot be opened for writing", "mem:write-init", "EACCES", ""},
		{"PID 1's environment cannot be read", "environ:init", "EACCES", ""},
		{"PID 1's memory map cannot be read", "maps:init", "EACCES", ""},
		{"PID 1's open files cannot be opened", "fd:write-init-stdout", "EACCES", ""},
		{"process_vm_readv of PID 1 is refused", "process_vm_readv:init", "EPERM", ""},
		{"ptrace of the launcher shell (which holds no secret) works under runc only", "ptrace:attach-launcher", "ok", "EPERM"},
		{"the launcher shell's memory is readable under runc (gVisor refuses)", "mem:read-launcher", "ok", "EACCES"},
		{"the run's tag is on no command line, in no environment and in no memory the program can read", "tag:readable", "nowhere", ""},
		{"a SIGALRM to PID 1 is delivered, and ignored before the sandbox's life is over (the probe runs on)", "signal:alrm-init", "ok", ""},
		{"a SIGSTOP to PID 1 is sent", "signal:stop-init", "ok", ""},
		// gVisor delivers it: PID 1 stops until the probe's SIGCONT. A
		// program that does not send one stops its own run's end marks,
		// and the sidecar ends the run at its timeout (see SECURITY.md).
		{"PID 1 is not stopped by it under runc (gVisor stops it)", "signal:stop-init-state", "S", "T"},
		{"setuid(0) is refused", "setuid:0", "EPERM", ""},
		{"setgroups([0]) is refused", "setgroups:0", "EPERM", ""},
		{"chown to root is refused", "chown:0", "EPERM", ""},
		// A change here means the image recipe changed: check the new
		// binary runs without privilege too, then update the list.
		{"the image's setuid binaries are these", "setuid:found", "/usr/bin/chfn,/usr/bin/chsh,/usr/bin/gpasswd,/usr/bin/mount,/usr/bin/newgrp,/usr/bin/passwd,/usr/bin/su,/usr/bin/umount", ""},
		{"setuid su runs with the sandbox uid (no-new-privileges)", "setuid:su-euid", strconv.Itoa(sb.UID), ""},
		{"setuid passwd runs with the sandbox uid (no-new-privileges)", "setuid:passwd-euid", strconv.Itoa(sb.UID), ""},
		{"/proc/sys/kernel/hostname is read-only", "procsys:hostname", "EROFS", "EACCES"},
		{"/proc/sys/kernel/core_pattern is read-only", "procsys:core_pattern", "EROFS", "EACCES"},
		{"/proc/sys/vm/drop_caches is read-only", "procsys:drop_caches", "EROFS", "EACCES"},
		{"/proc/sysrq-trigger is masked", "proc:sysrq-trigger", "ENOENT", "EACCES"},
		{"/proc/kcore is masked", "proc:kcore", "ENOENT", ""},
		{"the memory cgroup shows the policy's limit", "cgroup:memory-read", strconv.FormatInt(sb.MemoryBytes, 10), ""},
		{"the memory limit cannot be raised", "cgroup:memory-raise", "EROFS", "EACCES"},
		// gVisor shows its own pids cgroup; its process bound is RLIMIT_NPROC.
		{"the pids cgroup shows the policy's limit (gVisor shows its own)", "cgroup:pids-read", pids, "max"},
		{"the pids limit cannot be raised", "cgroup:pids-raise", "EROFS", "EACCES"},
		{"a character device cannot be made in /tmp", "mknod:tmp-char", "EPERM", ""},
		{"a block device cannot be made in /workspace", "mknod:workspace-block", "EPERM", ""},
		{"a symlink /workspace/root -> / can be made", "symlink:create", "ok", ""},
		{"a new file through it lands on the read-only root", "symlink:write-etc", "EROFS", "EACCES"},
		{"/etc/passwd through it is read-only", "symlink:write-passwd", "EROFS", "EACCES"},
		{"/proc/sys through it is read-only", "symlink:write-procsys", "EROFS", "EACCES"},
		{"a binary copied to /tmp does not run (noexec)", "noexec:tmp", noexec, ""},
		{"a binary copied to /workspace does not run (noexec)", "noexec:workspace", noexec, ""},
		{"IPv6 connect to a TEST-NET address fails", "ipv6:connect-testnet", v6testnet, v6testnetRunsc},
		{"IPv6 connect to ::1 fails (nothing listens, or no IPv6 address at all)", "ipv6:connect-loopback", v6loopback, ""},
		{"an IPv4-mapped IPv6 address fails", "ipv6:connect-mapped-testnet", "ENETUNREACH", ""},
		{"a raw IPv4 socket is refused", "raw:inet", "EPERM", ""},
		{"a raw IPv6 socket is refused", "raw:inet6", "EPERM", ""},
		{"a packet socket is refused", "raw:packet", "EPERM", ""},
		{"the probe ran to its end", "done", "", ""},
	}
}

// Adversarial runs the probe in r under runtime rt (r must run each Spec
// under rt) and checks every case's outcome, with o's differences.
func Adversarial(t *testing.T, r Runner, rt runner.Runtime, o Options) {
	t.Helper()
	nr, ok := advSyscalls[goruntime.GOARCH]
	if !ok {
		t.Fatalf("no system call numbers for %s: add them to advSyscalls", goruntime.GOARCH)
	}
	var table []string
	for name, n := range nr {
		table = append(table, fmt.Sprintf("%q: %d", name, n))
	}
	code := fmt.Sprintf(advProbe, "{"+strings.Join(table, ", ")+"}")
	spec := Spec(code)
	spec.Sandbox.Runtime = rt
	res, err := r.Run(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		t.Fatalf("the probe ended %s with %d:\nstdout %s\nstderr %s", res.Reason, res.ExitCode, res.Stdout, res.Stderr)
	}
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(res.Stdout), "\n") {
		label, value, _ := strings.Cut(line, " ")
		got[label] = value
	}
	for _, tc := range advCases(spec.Sandbox, o) {
		want := tc.runc
		if rt == runner.Runsc && tc.runsc != "" {
			want = tc.runsc
		}
		v, seen := got[tc.label]
		if !seen || v != want {
			t.Errorf("%s (%s): got %q (printed: %v), want %q", tc.name, tc.label, v, seen, want)
		}
	}
	if t.Failed() {
		t.Logf("probe stderr:\n%s", res.Stderr)
	}
}
