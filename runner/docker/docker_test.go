package docker

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/api/types/events"
	"github.com/docker/docker/api/types/mount"
	"github.com/docker/docker/client"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
	"github.com/gatekeeper-ai/gatekeeper/runner/launch"
	"github.com/gatekeeper-ai/gatekeeper/runner/runnertest"
	"github.com/gatekeeper-ai/gatekeeper/runner/sandbox"
	"github.com/gatekeeper-ai/gatekeeper/runner/seccomp"
)

func newFakeRunner(t *testing.T, f *fakeEngine) *Runner {
	t.Helper()
	r, err := newRunner(Config{Instance: "unit", DefaultImage: "img:test"}, f, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestNewRefusesBadInstanceNames(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"", "has space", "a/b", strings.Repeat("x", 65), "lab=el"} {
		if _, err := newRunner(Config{Instance: name}, newFake(), nil); err == nil {
			t.Errorf("instance %q accepted, want an error", name)
		}
	}
	if _, err := newRunner(Config{Instance: "gatekeeper-1.test_x"}, newFake(), nil); err != nil {
		t.Errorf("instance gatekeeper-1.test_x refused: %v", err)
	}
}

func TestRunRefusalsBeforeAnyContainer(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name     string
		runtimes []string
		edit     func(*runner.Spec)
		want     error
		wantMsg  string
	}{
		{
			name:     "runsc asked of an engine without it is refused, never run under runc",
			runtimes: []string{"runc"},
			edit:     func(s *runner.Spec) { s.Sandbox.Runtime = runner.Runsc },
			want:     runner.ErrRuntimeUnavailable,
			wantMsg:  "runsc",
		},
		{
			name:     "an enabled network is refused by a runner without an egress proxy",
			runtimes: []string{"runc", "runsc"},
			edit: func(s *runner.Spec) {
				s.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"example.com"}}
			},
			want:    runner.ErrNetworkUnsupported,
			wantMsg: "egress proxy",
		},
		{
			name:     "an unknown runtime is an invalid spec",
			runtimes: []string{"runc", "kata"},
			edit:     func(s *runner.Spec) { s.Sandbox.Runtime = "kata" },
			want:     runner.ErrInvalidSpec,
		},
		{
			name:     "an unknown language is an invalid spec",
			runtimes: []string{"runc"},
			edit:     func(s *runner.Spec) { s.Language = "cobol" },
			want:     runner.ErrInvalidSpec,
		},
		{
			name:     "gid 0 is refused like uid 0",
			runtimes: []string{"runc"},
			edit:     func(s *runner.Spec) { s.Sandbox.GID = 0 },
			want:     runner.ErrInvalidSpec,
		},
		{
			name:     "a missing image is the engine's not-found error",
			runtimes: []string{"runc"},
			edit:     func(s *runner.Spec) { s.Sandbox.Image = "missing:image" },
			want:     cerrdefs.ErrNotFound,
			wantMsg:  "missing:image",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake(tt.runtimes...)
			r := newFakeRunner(t, f)
			spec := runnertest.Spec("print(1)")
			tt.edit(&spec)
			_, err := r.Run(t.Context(), spec)
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run = %v, want an error wrapping %v", err, tt.want)
			}
			if !strings.Contains(fmtErr(err), tt.wantMsg) {
				t.Errorf("error %q does not mention %q", err, tt.wantMsg)
			}
			if n := f.count("ContainerCreate"); n != 0 {
				t.Errorf("%d containers created, want none", n)
			}
		})
	}
}

func fmtErr(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

func TestRuntimesAreAskedOnce(t *testing.T) {
	t.Parallel()
	f := newFake("runc")
	r := newFakeRunner(t, f)
	spec := runnertest.Spec("print(1)")
	spec.Sandbox.Runtime = runner.Runsc
	for range 3 {
		if _, err := r.Run(t.Context(), spec); !errors.Is(err, runner.ErrRuntimeUnavailable) {
			t.Fatalf("Run = %v, want ErrRuntimeUnavailable", err)
		}
	}
	if n := f.count("Info"); n != 1 {
		t.Errorf("engine info asked %d times, want once", n)
	}
}

func TestLanguageMissingFromImage(t *testing.T) {
	t.Parallel()
	f := newFake("runc")
	f.hasFile["/usr/bin/python3"] = true
	r := newFakeRunner(t, f)
	spec := runnertest.Spec("console.log(1)")
	spec.Language = runner.Node
	for range 2 {
		_, err := r.Run(t.Context(), spec)
		if !errors.Is(err, runner.ErrLanguageUnavailable) {
			t.Fatalf("Run = %v, want ErrLanguageUnavailable", err)
		}
		if !strings.Contains(err.Error(), "img:test") {
			t.Errorf("error %q does not name the image", err)
		}
	}
	if n := f.count("ContainerStatPath"); n != len(launch.ImagePath()) {
		t.Errorf("%d stat calls for two runs, want %d (one PATH search, then cached)", n, len(launch.ImagePath()))
	}
	if err := r.Close(); err != nil { // containers are removed in the background; Close waits
		t.Fatal(err)
	}
	if c, rm := f.count("ContainerCreate"), f.count("ContainerRemove"); c != rm {
		t.Errorf("%d containers created, %d removed; want all removed", c, rm)
	}
	if n := f.count("ContainerStart"); n != 0 {
		t.Errorf("%d containers started, want none", n)
	}
}

func TestUnreachableEngine(t *testing.T) {
	t.Parallel()
	cli, err := client.NewClientWithOpts(client.WithHost("unix://"+filepath.Join(t.TempDir(), "no.sock")), client.WithAPIVersionNegotiation())
	if err != nil {
		t.Fatal(err)
	}
	r, err := New(Config{Instance: "unreachable", DefaultImage: "img:test", Client: cli})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	_, err = r.Run(t.Context(), runnertest.Spec("print(1)"))
	if !errors.Is(err, runner.ErrUnavailable) {
		t.Fatalf("Run = %v, want ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "no.sock") {
		t.Errorf("error %q lacks the engine client's own message", err)
	}
	if _, err := r.Cleanup(t.Context()); !errors.Is(err, runner.ErrUnavailable) {
		t.Errorf("Cleanup = %v, want ErrUnavailable", err)
	}
}

func TestContainerSettings(t *testing.T) {
	t.Parallel()
	deps := t.TempDir()
	for _, rt := range []runner.Runtime{runner.Runc, runner.Runsc} {
		t.Run(string(rt), func(t *testing.T) {
			t.Parallel()
			r := newFakeRunner(t, newFake())
			spec := runnertest.Spec("print(1)")
			spec.Sandbox.Runtime = rt
			spec.Sandbox.UID, spec.Sandbox.GID = 1000, 1001
			spec.Sandbox.CPUs = 0.5
			spec.Sandbox.MemoryBytes = 128 << 20
			spec.Sandbox.PIDs = 50
			spec.Sandbox.DepsDir = deps
			spec.Timeout = 5 * time.Second
			spec.Labels = map[string]string{"team": "a", runner.LabelInstance: "spoofed"}
			p, err := r.Plan(spec)
			if err != nil {
				t.Fatal(err)
			}
			cfg, host := r.pf.containerSettings(spec, p, nil)
			check := func(what string, ok bool) {
				t.Helper()
				if !ok {
					t.Errorf("%s: config %+v host %+v", what, cfg, host)
				}
			}
			check("root file system read-only", host.ReadonlyRootfs)
			check("not privileged", !host.Privileged)
			check("all capabilities dropped", slices.Equal(host.CapDrop, []string{"ALL"}) && len(host.CapAdd) == 0)
			wantOpt := []string{"no-new-privileges:true"} // and Docker's default seccomp profile
			if rt == runner.Runsc {
				wantOpt = append(wantOpt, seccomp.DockerSecurityOpt())
			}
			check("no new privileges, the runtime's seccomp profile", slices.Equal(host.SecurityOpt, wantOpt))
			check("network none", host.NetworkMode == "none")
			check("runtime set", host.Runtime == string(rt))
			check("private ipc", host.IpcMode == "private")
			check("private pid and uts", host.PidMode == "" && host.UTSMode == "")
			check("no docker-init: PID 1 is the backstop", host.Init == nil || !*host.Init)
			check("PID 1 (init) ends the container 2s past the run's backstop", slices.Equal(cfg.Entrypoint[5:8], []string{"/usr/bin/perl", "-e", launch.Init()}) && cfg.Entrypoint[10] == "17")
			check("small shm", host.ShmSize == DefaultShmBytes)
			check("no logs on disk", host.LogConfig.Type == "none")
			check("no binds", len(host.Binds) == 0 && len(host.VolumesFrom) == 0 && len(host.Devices) == 0)
			check("cpu quota", host.NanoCPUs == 5e8)
			check("memory without swap", host.Memory == 128<<20 && host.MemorySwap == 128<<20)
			check("user", cfg.User == "1000:1001")
			check("environment", slices.Equal(cfg.Env, launch.Env()))
			check("workdir", cfg.WorkingDir == "/workspace")
			check("labels", cfg.Labels[runner.LabelInstance] == "unit" && cfg.Labels[runner.LabelRunID] == spec.RunID && cfg.Labels[runner.LabelQueryID] == "conformance" && cfg.Labels["team"] == "a")
			check("stdin for the workspace", cfg.OpenStdin && cfg.StdinOnce && !cfg.Tty)
			check("workspace tmpfs owned by the uid", host.Tmpfs["/workspace"] == "rw,noexec,nosuid,nodev,size=16777216,mode=0700,uid=1000,gid=1001")
			check("tmp tmpfs", host.Tmpfs["/tmp"] == "rw,noexec,nosuid,nodev,size=8388608,mode=1777")
			check("two tmpfs only", len(host.Tmpfs) == 2)
			check("one mount", len(host.Mounts) == 1)
			m := host.Mounts[0]
			check("deps read-only, non-recursive", m.Type == mount.TypeBind && m.Source == deps && m.Target == "/deps" &&
				m.ReadOnly && m.BindOptions != nil && m.BindOptions.NonRecursive)
			check("init waits for the code as long as it lets the container live, serves one run (no idle wait: no session), then starts the launcher", cfg.Entrypoint[11] == "17" && cfg.Entrypoint[12] == "0" && slices.Equal(cfg.Entrypoint[13:17], []string{"/bin/sh", "-c", launch.Script(), "gatekeeper-launcher"}))
			check("the header gives the backstop (timeout + 10s), language, end-mark tag and no snapshot", len(p.Input.Tag) == 16 && string(launch.Header(spec.Timeout, spec.Language, p.Input.Tag, launch.WantsSnapshot(spec))) == "15 python "+p.Input.Tag+" 0\n")
			check("clean environment for the program", cfg.Entrypoint[0] == "/usr/bin/env" && cfg.Entrypoint[1] == "-i")
			withFiles := spec
			withFiles.Sandbox.MaxFiles = 1
			ps, err := r.Plan(withFiles)
			if err != nil {
				t.Fatal(err)
			}
			psCfg, _ := r.pf.containerSettings(withFiles, ps, nil)
			check("a run that sends its workspace back asks for a snapshot and lives 30s longer for it",
				string(launch.Header(spec.Timeout, spec.Language, ps.Input.Tag, launch.WantsSnapshot(withFiles))) == "15 python "+ps.Input.Tag+" 1\n" &&
					psCfg.Entrypoint[10] == "47")

			ulimits := map[string]int64{}
			for _, u := range host.Ulimits {
				check("ulimit soft equals hard", u.Soft == u.Hard)
				ulimits[u.Name] = u.Hard
			}
			check("nofile", ulimits["nofile"] == sandbox.DefaultNofile)
			check("fsize above the largest tmpfs", ulimits["fsize"] == 2*(16<<20))
			switch rt {
			case runner.Runc:
				check("pids cgroup is the policy", *host.PidsLimit == 50)
				check("nproc is the host backstop", ulimits["nproc"] == sandbox.DefaultHostNproc)
			case runner.Runsc:
				check("pids cgroup leaves room for gVisor", *host.PidsLimit == 2*50+DefaultRunscPIDsExtra)
				check("nproc is the policy inside gVisor", ulimits["nproc"] == 50)
			}
			for _, s := range append(append([]string{}, host.SecurityOpt...), host.Binds...) {
				if strings.Contains(s, "unconfined") || strings.Contains(s, "docker.sock") {
					t.Errorf("forbidden setting %q", s)
				}
			}
		})
	}
}

func TestCheckDeps(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	mk := func(rel string) string {
		p := filepath.Join(root, rel)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		return p
	}
	libs := mk("libs/")
	os.MkdirAll(filepath.Join(libs, "pkg"), 0o755)
	os.WriteFile(filepath.Join(libs, "pkg", "mod.py"), []byte("x"), 0o644)
	secrets := mk("secrets/")
	os.MkdirAll(filepath.Join(secrets, "inner"), 0o755)
	os.WriteFile(filepath.Join(secrets, "inner", ".env"), []byte("x"), 0o644)
	link := filepath.Join(root, "link-to-etc")
	if err := os.Symlink("/etc", link); err != nil {
		t.Fatal(err)
	}
	withSocket := mk("withsocket/")
	os.MkdirAll(withSocket, 0o755)
	ln, err := net.Listen("unix", filepath.Join(withSocket, "ctl.sock"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	upper := mk("upper/")
	os.MkdirAll(upper, 0o755)
	os.WriteFile(filepath.Join(upper, ".ENV"), []byte("x"), 0o644)
	notDir := filepath.Join(root, "file")
	os.WriteFile(notDir, []byte("x"), 0o644)

	tests := []struct {
		name  string
		dir   string
		globs []string
		extra []string
		ok    bool
	}{
		{"a plain library directory is accepted", libs, []string{"**/.env", "/root/**"}, nil, true},
		{"the host root is refused", "/", nil, nil, false},
		{"a symlink to /etc is refused", link, nil, nil, false},
		{"a file is refused", notDir, nil, nil, false},
		{"a missing directory is refused", filepath.Join(root, "missing"), nil, nil, false},
		{"a directory containing .env deep down is refused for **/.env", secrets, []string{"**/.env"}, nil, false},
		{"a directory containing .env is refused for a relative .env glob", secrets, []string{".env"}, nil, false},
		{"a directory matching a glob with a wildcard is refused", libs, []string{root + "/lib*"}, nil, false},
		{"a directory inside a glob's match is refused", filepath.Join(libs, "pkg"), []string{root + "/libs"}, nil, false},
		{"a directory containing a file matching an absolute glob is refused", libs, []string{root + "/libs/pkg/*.py"}, nil, false},
		{"a glob matching elsewhere does not refuse", libs, []string{root + "/secrets/**"}, nil, true},
		{"a sloppy glob with // and ./ still refuses", libs, []string{root + "//./libs/"}, nil, false},
		{"a directory containing an extra protected path is refused", root, nil, []string{filepath.Join(root, "libs", "sock")}, false},
		{"a bad glob refuses rather than passes", libs, []string{"[unclosed"}, nil, false},
		{"a directory holding a unix socket is refused", withSocket, nil, nil, false},
		{"a brace glob refuses a directory it names", libs, []string{root + "/{libs,other}"}, nil, false},
		{"a brace glob refuses a directory holding a file it names", secrets, []string{"**/{.env,.npmrc}"}, nil, false},
		{"a brace glob naming other files accepts", libs, []string{"**/{.env,.npmrc}"}, nil, true},
		{"a deny glob matches without case", upper, []string{"**/.env"}, nil, false},
		{"a deny glob in upper case matches a lower-case directory", libs, []string{strings.ToUpper(root) + "/LIBS"}, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := checkDeps(tt.dir, tt.globs, tt.extra)
			if (err == nil) != tt.ok {
				t.Fatalf("checkDeps(%s, %q) = %v, want ok=%v", tt.dir, tt.globs, err, tt.ok)
			}
		})
	}
}

// fakeEgress serves nothing and records registrations.
type fakeEgress struct {
	mu         sync.Mutex
	registered map[netip.Addr]egress.RunIdentity
}

func (f *fakeEgress) Serve(ctx context.Context, ln net.Listener) error {
	<-ctx.Done()
	return ln.Close()
}

func (f *fakeEgress) Register(addr netip.Addr, reg egress.Registration) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.registered == nil {
		f.registered = map[netip.Addr]egress.RunIdentity{}
	}
	f.registered[addr] = reg.Run
	return nil
}

func (f *fakeEgress) Bind(addr netip.Addr, id egress.RunIdentity) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, ok := f.registered[addr]; !ok {
		return egress.ErrNotRegistered
	}
	f.registered[addr] = id
	return nil
}

func (f *fakeEgress) CACert() []byte {
	return []byte("-----BEGIN CERTIFICATE-----\nfake\n-----END CERTIFICATE-----\n")
}

func (f *fakeEgress) Unregister(addr netip.Addr) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.registered, addr)
}

func newFakeNetRunner(t *testing.T, f *fakeEngine, fw *fakeFirewall) *Runner {
	t.Helper()
	r, err := newRunner(Config{Instance: "unit", DefaultImage: "img:test", Egress: &fakeEgress{}}, f, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	r.pf.fw = fw
	return r
}

func TestNetworkRefusals(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		network runner.Network
		fwErr   error
		want    error
		wantMsg string
		netMade bool
	}{
		{
			name:    "a bad allow pattern is an invalid spec, before any network exists",
			network: runner.Network{Enabled: true, Allow: []string{"*"}},
			want:    runner.ErrInvalidSpec,
			wantMsg: "net.allow[0]",
		},
		{
			name:    "a bad deny pattern is an invalid spec",
			network: runner.Network{Enabled: true, Allow: []string{"ok.example"}, Deny: []string{"a b"}},
			want:    runner.ErrInvalidSpec,
			wantMsg: "net.deny[0]",
		},
		{
			name:    "a host firewall that cannot be installed refuses the run and removes the network",
			network: runner.Network{Enabled: true, Allow: []string{"ok.example"}},
			fwErr:   errors.New("iptables: permission denied"),
			want:    runner.ErrNetworkUnsupported,
			wantMsg: "permission denied",
			netMade: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newFake("runc")
			r := newFakeNetRunner(t, f, &fakeFirewall{installErr: tt.fwErr})
			spec := runnertest.Spec("print(1)")
			spec.Sandbox.Network = tt.network
			_, err := r.Run(t.Context(), spec)
			if !errors.Is(err, tt.want) || !strings.Contains(fmtErr(err), tt.wantMsg) {
				t.Fatalf("Run = %v, want an error wrapping %v mentioning %q", err, tt.want, tt.wantMsg)
			}
			if n := f.count("ContainerCreate"); n != 0 {
				t.Errorf("%d containers created, want none", n)
			}
			made, removed := f.count("NetworkCreate"), f.count("NetworkRemove")
			if (made == 1) != tt.netMade || made != removed {
				t.Errorf("%d networks created, %d removed; want %v created and all removed", made, removed, tt.netMade)
			}
		})
	}
}

func TestNetworkContainerSettings(t *testing.T) {
	t.Parallel()
	f := newFake("runc")
	fw := &fakeFirewall{}
	r := newFakeNetRunner(t, f, fw)
	spec := runnertest.Spec("print(1)")
	spec.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"pypi.org"}}
	p, err := r.Plan(spec)
	if err != nil {
		t.Fatal(err)
	}
	sn, err := r.pf.openNetwork(t.Context(), spec)
	if err != nil {
		t.Fatal(err)
	}
	proxy := "http://" + sn.proxy.String()
	cfg, host := r.pf.containerSettings(spec, p, sn)
	if host.NetworkMode != container.NetworkMode(sn.name) || !strings.HasPrefix(sn.name, "gatekeeper-unit-") {
		t.Errorf("network mode %q, want the run's network %q", host.NetworkMode, sn.name)
	}
	if !slices.Equal(host.DNS, []string{"0.0.0.0"}) {
		t.Errorf("DNS %v, want 0.0.0.0 only (no server)", host.DNS)
	}
	wantEnv := append(append([]string{}, launch.Env()...), "HTTP_PROXY="+proxy, "HTTPS_PROXY="+proxy, "http_proxy="+proxy, "https_proxy="+proxy, "NO_PROXY=", "no_proxy=")
	if !slices.Equal(cfg.Env, wantEnv) {
		t.Errorf("env %q, want %q", cfg.Env, wantEnv)
	}
	if n := strings.Count(strings.Join(cfg.Entrypoint, " "), "HTTPS_PROXY="+proxy); n != 1 {
		t.Errorf("the program's env -i line carries HTTPS_PROXY %d times, want once: %q", n, cfg.Entrypoint)
	}
	if rule, ok := fw.installed[sn.fw.id]; !ok || rule.gateway != sn.gateway || rule.port != sn.proxy.Port() || rule.bridge() != "gk-"+sn.fw.id {
		t.Errorf("firewall %+v, want the gateway %s and proxy port %d", fw.installed, sn.gateway, sn.proxy.Port())
	}
	sn.close()
	if len(fw.installed) != 0 || f.count("NetworkRemove") != 1 {
		t.Errorf("after close: firewall %v, %d networks removed; want none left", fw.installed, f.count("NetworkRemove"))
	}
}

// TestRemovalsTheEngineRefusedAreRetried: the soak restarted the engine
// under a networked run, whose container and network removals failed
// while the engine was down; the network stayed behind for good. Failed
// removals are now retried, the container before its network, until they
// succeed.
func TestRemovalsTheEngineRefusedAreRetried(t *testing.T) {
	t.Parallel()
	f := newFake("runc")
	f.failRemovals = 2 // the run's own two
	r := newFakeNetRunner(t, f, &fakeFirewall{})
	r.pf.retry.min, r.pf.retry.max = 5*time.Millisecond, 20*time.Millisecond
	spec := runnertest.Spec("print(1)")
	spec.Sandbox.Network = runner.Network{Enabled: true, Allow: []string{"pypi.org"}}
	if _, err := r.Run(t.Context(), spec); err == nil {
		t.Fatal("the fake engine starts no container, yet Run succeeded")
	}
	for i := 0; r.pf.retry.count() > 0; i++ {
		if i == 1000 {
			t.Fatalf("%v removals still pending", r.pf.retry.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.mu.Lock()
	removed := slices.Clone(f.removed)
	f.mu.Unlock()
	if len(removed) != 2 || removed[0] != "c0ffee" || !strings.HasPrefix(removed[1], "net-gatekeeper-unit-") {
		t.Fatalf("removed %v, want the container, then its network", removed)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
}

// TestAn137IsCheckedAgainstTheEngineOOMEvents: the soak's memory bombs
// now and then came back "exited" with 137 instead of "oom_killed": under
// load the runtime reported the exit before the OOM, and Docker 20.10
// then logs the oom event but leaves the container's OOMKilled false. A
// 137 the runner did not cause is an OOM kill if the memory use reached
// the limit or the engine logged an oom event (one soak run had no event
// in time, and a peak of exactly the 256 MiB limit).
func TestAn137IsCheckedAgainstTheEngineOOMEvents(t *testing.T) {
	t.Parallel()
	oom := func(id string) events.Message {
		return events.Message{Type: events.ContainerEventType, Action: events.ActionOOM, Actor: events.Actor{ID: id}}
	}
	const limit = 256 << 20
	tests := []struct {
		name   string
		peak   int64
		events []events.Message
		want   bool
	}{
		{"an oom event of the container is an OOM kill", 1 << 20, []events.Message{oom("c0ffee")}, true},
		{"memory use at the limit is an OOM kill, with no event", limit, nil, true},
		{"memory use below the limit and no event is not", limit - 4096, nil, false},
		{"an oom event of another container is not", 1 << 20, []events.Message{oom("bad1dea")}, false},
	}
	for _, tc := range tests {
		f := newFake("runc")
		f.events = tc.events
		r, err := newRunner(Config{Instance: "unit", DefaultImage: "img:test"}, f, func() error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		if got := r.pf.oomKilled("c0ffee", tc.peak, limit, time.Now()); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

// TestAContainerWhoseCreateAnswerWasLostIsRemoved: the soak restarted the
// engine while a run's create was under way; the engine made the
// container and stopped before it answered (EOF), so the runner never
// learned its id and the container stayed, created, for good. A failed
// create is now followed by a search for its label, until none is found.
func TestAContainerWhoseCreateAnswerWasLostIsRemoved(t *testing.T) {
	t.Parallel()
	f := newFake("runc")
	f.loseCreates = true
	r, err := newRunner(Config{Instance: "unit", DefaultImage: "img:test"}, f, func() error { return nil })
	if err != nil {
		t.Fatal(err)
	}
	r.pf.retry.min, r.pf.retry.max, r.pf.retry.lost = 5*time.Millisecond, 20*time.Millisecond, 20*time.Millisecond
	if _, err := r.Run(t.Context(), runnertest.Spec("print(1)")); err == nil || !strings.Contains(err.Error(), "EOF") {
		t.Fatalf("Run = %v, want the lost create's error", err)
	}
	for i := 0; r.pf.retry.count() > 0; i++ {
		if i == 1000 {
			t.Fatalf("%v removals still pending", r.pf.retry.count())
		}
		time.Sleep(5 * time.Millisecond)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.containers) != 0 || !slices.Equal(f.removed, []string{"lost-c0ffee"}) {
		t.Fatalf("left %v, removed %v; want the lost create's container removed", f.containers, f.removed)
	}
}
