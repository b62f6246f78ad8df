package kube

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

// checkRetry is how long a failed check of a RuntimeClass (or an image's
// probe) stands before a run tries it again.
const checkRetry = 30 * time.Second

// egressListener serves the egress proxy at Config.EgressAddr for the
// runner's life, opened on first use, beside a canary listener on the
// same address that no Pod may reach.
type egressListener struct {
	r      *platform
	mu     sync.Mutex
	proxy  netip.AddrPort // valid once open
	canary *canaryListener
	lns    []net.Listener
	stop   context.CancelFunc
	served sync.WaitGroup
}

// addr opens the listeners once and returns where Pods reach the proxy.
// An address that cannot be listened on is runner.ErrNetworkUnsupported.
func (e *egressListener) addr(ctx context.Context) (netip.AddrPort, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.proxy.IsValid() {
		return e.proxy, nil
	}
	cfg := e.r.cfg
	first, last := cfg.EgressPorts[0], cfg.EgressPorts[1]
	if last < first {
		last = first
	}
	var ln net.Listener
	var errs []error
	for port := int(first); port <= int(last); port++ {
		l, err := cfg.Listen("tcp4", netip.AddrPortFrom(cfg.EgressAddr, uint16(port)).String())
		if err == nil {
			ln = l
			break
		}
		errs = append(errs, err)
	}
	if ln == nil {
		return netip.AddrPort{}, fmt.Errorf("listen for the egress proxy at %s, ports %d to %d: %w: %w", cfg.EgressAddr, first, last, runner.ErrNetworkUnsupported, errors.Join(errs...))
	}
	cl, err := cfg.Listen("tcp4", netip.AddrPortFrom(cfg.EgressAddr, 0).String())
	if err != nil {
		ln.Close()
		return netip.AddrPort{}, fmt.Errorf("listen for the canary at %s: %w: %w", cfg.EgressAddr, runner.ErrNetworkUnsupported, err)
	}
	serveCtx, stop := context.WithCancel(context.WithoutCancel(ctx))
	e.stop, e.lns = stop, []net.Listener{ln, cl}
	e.proxy = ln.Addr().(*net.TCPAddr).AddrPort()
	e.canary = &canaryListener{ln: cl}
	e.served.Add(2)
	go func() {
		defer e.served.Done()
		if err := cfg.Egress.Serve(serveCtx, ln); err != nil && serveCtx.Err() == nil {
			e.r.log.Error("egress proxy stopped serving the sandbox Pods", "addr", e.proxy, "err", err)
		}
	}()
	go func() {
		defer e.served.Done()
		e.canary.serve()
	}()
	e.r.log.Info("serving the egress proxy for sandbox Pods", "addr", e.proxy, "canary", cl.Addr().String())
	return e.proxy, nil
}

// canaryAddr is the canary listener's address; invalid before addr.
func (e *egressListener) canaryAddr() (netip.AddrPort, *canaryListener) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.canary == nil {
		return netip.AddrPort{}, nil
	}
	return e.canary.ln.Addr().(*net.TCPAddr).AddrPort(), e.canary
}

// close stops serving and closes the listeners.
func (e *egressListener) close() {
	e.mu.Lock()
	stop, lns := e.stop, e.lns
	e.mu.Unlock()
	if stop == nil {
		return
	}
	stop()
	for _, ln := range lns {
		ln.Close()
	}
	e.served.Wait()
}

// canaryListener accepts and counts connections no Pod should make.
type canaryListener struct {
	ln       net.Listener
	mu       sync.Mutex
	accepted int
}

func (c *canaryListener) serve() {
	for {
		conn, err := c.ln.Accept()
		if err != nil {
			return
		}
		c.mu.Lock()
		c.accepted++
		c.mu.Unlock()
		conn.Close()
	}
}

func (c *canaryListener) count() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.accepted
}

// classChecks holds what the canary found of each RuntimeClass.
type classChecks struct {
	r      *platform
	mu     sync.Mutex
	states map[string]*classState
}

type classState struct {
	mu  sync.Mutex // held while the class is checked
	ok  bool
	err error
	at  time.Time
}

func newClassChecks(r *platform) *classChecks {
	return &classChecks{r: r, states: map[string]*classState{}}
}

// passed reports whether the class's canary passed.
func (c *classChecks) passed(class string) bool {
	c.mu.Lock()
	st, ok := c.states[class]
	c.mu.Unlock()
	if !ok {
		return false
	}
	if !st.mu.TryLock() {
		return false // being checked
	}
	defer st.mu.Unlock()
	return st.ok
}

// require returns nil when the class of plan p passed its check, running
// the check first if it has not run (or failed over checkRetry ago); else
// why runs under it are refused.
func (c *classChecks) require(ctx context.Context, p *plan) error {
	c.mu.Lock()
	st, ok := c.states[p.class]
	if !ok {
		st = &classState{}
		c.states[p.class] = st
	}
	c.mu.Unlock()
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.ok {
		return nil
	}
	if st.err != nil && time.Since(st.at) < checkRetry {
		return st.err
	}
	err := c.check(ctx, p)
	if ctx.Err() != nil || errors.Is(err, errImageMissing) {
		return err // not the class's fault: check again next time
	}
	st.ok, st.err, st.at = err == nil, err, time.Now()
	if err != nil {
		c.r.log.Error("runtime class refused: its runs answer runner_unavailable", "class", p.class, "err", err)
	} else {
		c.r.log.Info("runtime class checked", "class", p.class, "network", p.network)
	}
	return err
}

// check is Runner.Check.
func (r *platform) check(ctx context.Context, image string) map[string]error {
	if err := r.watch.start(ctx); err != nil {
		return map[string]error{"": err}
	}
	out := map[string]error{}
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		for _, network := range []bool{false, true} {
			class := r.cfg.Classes.For(rt, network)
			if class == "" || (network && r.egress == nil) {
				continue
			}
			sb := probeSandbox()
			sb.Image, sb.Runtime, sb.Network.Enabled = image, rt, network
			out[class] = r.checks.require(ctx, r.podPlan(&sandbox.Plan{Image: image, Runtime: rt, Sandbox: sb}))
		}
	}
	return out
}

// check runs the RuntimeClass's canary: see the package doc.
func (c *classChecks) check(ctx context.Context, p *plan) error {
	r := c.r
	targets := map[string]netip.AddrPort{}
	var canary *canaryListener
	if r.egress != nil {
		proxy, err := r.egress.addr(ctx)
		if err != nil {
			if p.network {
				return err
			}
		} else {
			targets["egress"] = proxy
			targets["canary"], canary = r.egress.canaryAddr()
		}
	}
	if api, ok := r.apiServerAddr(ctx); ok {
		targets["api"] = api
	}
	before := 0
	if canary != nil {
		before = canary.count()
	}
	out, err := r.probe(ctx, p, targets)
	if errors.Is(err, errImageMissing) {
		return err // the image's fault, not the class's
	}
	if apierrors.IsForbidden(err) && !errors.Is(err, runner.ErrUnavailable) {
		// The runner's Role cannot read RuntimeClasses (cluster-wide): a
		// class that does not exist shows as its canary Pod refused.
		return fmt.Errorf("RuntimeClass %s: the API server refused its canary Pod (the RuntimeClass admission plugin refuses a Pod whose class does not exist): %w: %w", p.class, runner.ErrRuntimeUnavailable, err)
	}
	if err != nil {
		return fmt.Errorf("the canary of RuntimeClass %s: %w: %w", p.class, runner.ErrRuntimeUnavailable, err)
	}
	r.images.record(p.Image, out.interps)
	var wrong []string
	for name := range targets {
		got, ok := out.connects[name]
		switch {
		case !ok || got == "":
			wrong = append(wrong, "the canary did not test "+name)
		case name == "egress" && p.network:
			if got != "ok" {
				wrong = append(wrong, fmt.Sprintf("it cannot reach the egress proxy at %s (errno %s)", targets[name], got))
			}
		case got == "ok":
			wrong = append(wrong, fmt.Sprintf("it reached %s at %s, which no sandbox may", name, targets[name]))
		case !isErrno(got):
			wrong = append(wrong, fmt.Sprintf("its test of %s said %q", name, got))
		}
	}
	if !p.network && out.ifaces != "lo" {
		wrong = append(wrong, fmt.Sprintf("it has the network interfaces %q, want only lo", out.ifaces))
	}
	if canary != nil && canary.count() != before {
		wrong = append(wrong, "the canary listener was reached")
	}
	if !r.hostUsers(p.Runtime) && (out.uidMap == "" || out.uidMap == identityUIDMap) {
		return fmt.Errorf("RuntimeClass %s fails its canary: its Pods do not get a user namespace of their own (uid_map %q), so RLIMIT_NPROC cannot bound one run's processes; use a runtime handler with idmapped mounts (runc 1.2 or later, Linux 6.3 or later), or accept the node-wide pids bound with HostUsers (--kube-host-users): %w",
			p.class, out.uidMap, runner.ErrRuntimeUnavailable)
	}
	if out.seccomp != seccompFilter || out.clone3 == errnoEPERM {
		return fmt.Errorf("RuntimeClass %s fails its canary: its Pods must run under a seccomp filter that lets threads start (Seccomp %q in /proc/self/status, want %s; clone3 answered %q, and EPERM stops libc from falling back to clone); for gVisor, set oci-seccomp = \"true\" in the handler's runsc_config and install runner/seccomp's profile as the kubelet's Localhost profile %s (scripts/ensure-kube does both): %w",
			p.class, out.seccomp, seccompFilter, out.clone3, seccomp.LocalhostProfile(), runner.ErrRuntimeUnavailable)
	}
	if len(wrong) > 0 {
		what := "its sandboxes must have only loopback"
		if p.network {
			what = "its sandboxes must reach the egress proxy and nothing else"
		}
		return fmt.Errorf("RuntimeClass %s fails its canary (%s): %s: %w", p.class, what, strings.Join(wrong, "; "), runner.ErrNetworkUnsupported)
	}
	return nil
}

// apiServerAddr is the API server's address as an IP and port, for the
// canary; ok is false when it cannot be told.
func (r *platform) apiServerAddr(ctx context.Context) (netip.AddrPort, bool) {
	u, err := url.Parse(r.cfg.REST.Host)
	if err != nil || u.Host == "" {
		u, err = url.Parse("https://" + r.cfg.REST.Host)
		if err != nil {
			return netip.AddrPort{}, false
		}
	}
	port := u.Port()
	if port == "" {
		port = "443"
	}
	n, err := strconv.ParseUint(port, 10, 16)
	if err != nil {
		return netip.AddrPort{}, false
	}
	addrs, err := net.DefaultResolver.LookupNetIP(ctx, "ip4", u.Hostname())
	if err != nil || len(addrs) == 0 {
		return netip.AddrPort{}, false
	}
	return netip.AddrPortFrom(addrs[0].Unmap(), uint16(n)), true
}

// identityUIDMap is /proc/self/uid_map in the node's own user namespace.
const identityUIDMap = "0 0 4294967295"

// seccompFilter is the Seccomp field of /proc/self/status under a seccomp
// filter (SECCOMP_MODE_FILTER); gVisor's kernel reports the filters it runs
// for the process, so under runsc it is 2 only with oci-seccomp.
const seccompFilter = "2"

// errnoEPERM is EPERM as the probe prints an errno. A canary's clone3 that
// fails with it (gVisor answering Docker's clone3 ENOSYS rule with EPERM,
// gVisor bug #14688) means libc, which falls back to clone only on ENOSYS,
// can start no thread in the class's Pods.
const errnoEPERM = "1"

func isErrno(s string) bool {
	n, err := strconv.Atoi(s)
	return err == nil && n > 0
}

// probeOutput is what a probe run saw.
type probeOutput struct {
	ifaces   string            // the network interfaces, sorted, comma-separated
	uidMap   string            // the first line of /proc/self/uid_map
	seccomp  string            // the Seccomp field of /proc/self/status
	clone3   string            // the errno of clone3(NULL, 0), which never starts a process
	interps  map[string]bool   // the interpreters in PATH
	connects map[string]string // "ok" or the errno of each connect
}

// probeScript lists the interfaces and the interpreters, then connects to
// each NAME=ADDR of $1 with perl (perl-base is in every Debian image) and
// prints "ok" or the errno.
const probeScript = `printf 'ifaces '; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | paste -sd, -
printf 'uidmap '; head -n 1 /proc/self/uid_map | tr -s ' ' | sed 's/^ //'
printf 'seccomp '; sed -n 's/^Seccomp:[[:space:]]*//p' /proc/self/status
printf 'clone3 '; perl -e 'print syscall(435, 0, 0) == -1 ? $!+0 : "ok", "\n"' || echo perl-failed
for i in %s; do command -v "$i" >/dev/null 2>&1 && echo "interp $i"; done
for t in %s; do
  printf 'connect %%s ' "${t%%%%=*}"
  perl -MIO::Socket::INET -e '$s = IO::Socket::INET->new(PeerAddr => $ARGV[0], Proto => "tcp", Timeout => 3); print $s ? "ok\n" : (($!+0) . "\n")' "${t#*=}" || echo perl-failed
done
`

// probeSandbox is the small sandbox of canary and probe runs.
func probeSandbox() runner.Sandbox {
	return runner.Sandbox{UID: 65534, GID: 65534, CPUs: 0.25, MemoryBytes: 64 << 20, PIDs: 32,
		WorkspaceBytes: 1 << 20, TmpBytes: 1 << 20, MaxOutputBytes: 16 << 10}
}

func probeSpec(sb runner.Sandbox) runner.Spec {
	return runner.Spec{RunID: "probe-" + launch.NewTag(), QueryID: "gatekeeper-probe", Language: runner.Shell,
		Timeout: 30 * time.Second, Sandbox: sb}
}

// probe runs probeScript in a Pod of p's class and image, outside the
// checks and the pool, connecting to targets.
func (r *platform) probe(ctx context.Context, p *plan, targets map[string]netip.AddrPort) (probeOutput, error) {
	var interps []string
	for _, l := range runner.Languages() {
		prog, _ := launch.ProgramFor(l)
		interps = append(interps, prog.Interp)
	}
	var ts []string
	for name, addr := range targets {
		ts = append(ts, name+"="+addr.String())
	}
	sb := probeSandbox()
	sb.Image, sb.Runtime = p.Image, p.Runtime
	if p.network {
		sb.Network = runner.Network{Enabled: true}
	}
	spec := probeSpec(sb)
	spec.Code = fmt.Sprintf(probeScript, strings.Join(interps, " "), strings.Join(ts, " "))
	res, err := r.sr.Probe(ctx, spec)
	if err != nil {
		return probeOutput{}, err
	}
	if res.Reason != runner.Exited || res.ExitCode != 0 {
		return probeOutput{}, fmt.Errorf("the probe ended %s with %d (stderr %q)", res.Reason, res.ExitCode, res.Stderr)
	}
	out := probeOutput{interps: map[string]bool{}, connects: map[string]string{}}
	for _, line := range strings.Split(res.Stdout, "\n") {
		f := strings.Fields(line)
		switch {
		case len(f) >= 1 && f[0] == "ifaces":
			out.ifaces = strings.Join(f[1:], "")
		case len(f) >= 1 && f[0] == "uidmap":
			out.uidMap = strings.Join(f[1:], " ")
		case len(f) == 2 && f[0] == "seccomp":
			out.seccomp = f[1]
		case len(f) == 2 && f[0] == "clone3":
			out.clone3 = f[1]
		case len(f) == 2 && f[0] == "interp":
			out.interps[f[1]] = true
		case len(f) == 3 && f[0] == "connect":
			out.connects[f[1]] = f[2]
		}
	}
	return out, nil
}

// imageProbes holds the interpreters each image has, as a probe run found
// them.
type imageProbes struct {
	r      *platform
	mu     sync.Mutex
	images map[string]*imageState
}

type imageState struct {
	mu      sync.Mutex // held while the image is probed
	interps map[string]bool
	err     error
	at      time.Time
}

func newImageProbes(r *platform) *imageProbes {
	return &imageProbes{r: r, images: map[string]*imageState{}}
}

func (ip *imageProbes) state(image string) *imageState {
	ip.mu.Lock()
	defer ip.mu.Unlock()
	st, ok := ip.images[image]
	if !ok {
		st = &imageState{}
		ip.images[image] = st
	}
	return st
}

// record keeps what a probe found in image.
func (ip *imageProbes) record(image string, interps map[string]bool) {
	st := ip.state(image)
	st.mu.Lock()
	defer st.mu.Unlock()
	st.interps, st.err = interps, nil
}

// require makes sure image has lang's interpreter in its PATH, probing
// the image once (under p's class) if no probe has yet.
func (ip *imageProbes) require(ctx context.Context, p *plan, lang runner.Language) error {
	st := ip.state(p.Image)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.interps == nil && (st.err == nil || time.Since(st.at) >= checkRetry) {
		out, err := ip.r.probe(ctx, p, nil)
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, errImageMissing) {
				return err // probed again on the next run, once the image is loaded
			}
			st.err, st.at = fmt.Errorf("list the interpreters of image %s: %w", p.Image, err), time.Now()
		} else {
			st.interps, st.err = out.interps, nil
		}
	}
	if st.err != nil {
		return st.err
	}
	prog, ok := launch.ProgramFor(lang)
	if !ok {
		return fmt.Errorf("unknown language %q: %w", lang, runner.ErrInvalidSpec)
	}
	if !st.interps[prog.Interp] {
		return fmt.Errorf("%s: no %s in image %s: %w", lang, prog.Interp, p.Image, runner.ErrLanguageUnavailable)
	}
	return nil
}
