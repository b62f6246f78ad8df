package bench

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Process is a server the harness started (the sidecar or OPA). Its output
// goes to a log file in the harness's work directory, named in errors.
type Process struct {
	Name   string
	Socket string // the Unix socket it serves on
	Log    string // its stdout and stderr
	cmd    *exec.Cmd
	done   chan struct{}
	err    error
}

// Start runs argv (in a process group of its own) with output to logPath
// and waits until GET healthPath on socket answers 200, or fails with the
// log's tail.
func Start(ctx context.Context, name, socket, healthPath, logPath string, argv, env []string) (*Process, error) {
	logf, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdout, cmd.Stderr = logf, logf
	if len(env) > 0 {
		cmd.Env = append(os.Environ(), env...)
	}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		logf.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &Process{Name: name, Socket: socket, Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		logf.Close()
		close(p.done)
	}()
	hc := UnixHTTPClient(socket, 1)
	deadline := time.Now().Add(30 * time.Second)
	for {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://local"+healthPath, nil)
		if resp, err := hc.Do(req); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return p, nil
			}
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("%s exited at start (%v); see %s:\n%s", name, p.err, logPath, Tail(logPath, 20))
		case <-ctx.Done():
			p.Stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.Stop()
			return nil, fmt.Errorf("%s not healthy within 30s; see %s:\n%s", name, logPath, Tail(logPath, 20))
		}
	}
}

// PID is the process id.
func (p *Process) PID() int { return p.cmd.Process.Pid }

// Signal sends sig to the process.
func (p *Process) Signal(sig os.Signal) error { return p.cmd.Process.Signal(sig) }

// Done is closed when the process has exited; Err then says how.
func (p *Process) Done() <-chan struct{} { return p.done }

// Err is the process's exit error (nil for status 0), once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Stop sends SIGTERM, waits up to 15s (the sidecar removes its containers
// on the way out), then kills. Calling it again does nothing.
func (p *Process) Stop() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(15 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// Memory is a process's resident memory from /proc/PID/status, in bytes.
type Memory struct {
	RSS int64 // VmRSS: resident now
	HWM int64 // VmHWM: the highest resident size so far
}

// ReadMemory reads VmRSS and VmHWM of pid.
func ReadMemory(pid int) (Memory, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Memory{}, err
	}
	defer f.Close()
	var m Memory
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || (k != "VmRSS" && k != "VmHWM") {
			continue
		}
		n, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		if err != nil {
			return Memory{}, fmt.Errorf("parse %s of pid %d: %w", k, pid, err)
		}
		if k == "VmRSS" {
			m.RSS = n << 10
		} else {
			m.HWM = n << 10
		}
	}
	if m.RSS == 0 {
		return m, fmt.Errorf("no VmRSS for pid %d", pid)
	}
	return m, sc.Err()
}

// RSSSampler reads a process's VmRSS every interval until Stop and keeps
// the highest value seen. It owns one goroutine, ended by Stop.
type RSSSampler struct {
	pid  int
	stop chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	max  int64
	n    int
}

// SampleRSS starts sampling pid.
func SampleRSS(pid int, every time.Duration) *RSSSampler {
	s := &RSSSampler{pid: pid, stop: make(chan struct{})}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			if m, err := ReadMemory(pid); err == nil {
				s.mu.Lock()
				s.max, s.n = max(s.max, m.RSS), s.n+1
				s.mu.Unlock()
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// Stop ends sampling and returns the highest VmRSS seen and how many
// samples were taken.
func (s *RSSSampler) Stop() (maxRSS int64, samples int) {
	close(s.stop)
	s.wg.Wait()
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.max, s.n
}

// UnixHTTPClient is an HTTP client whose every request goes to socket over
// at most conns kept-alive connections.
func UnixHTTPClient(socket string, conns int) *http.Client {
	return &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", socket)
		},
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		MaxConnsPerHost:     conns,
		IdleConnTimeout:     time.Minute,
	}, Timeout: 30 * time.Second}
}

// Tail returns the last n lines of a file, for error messages.
func Tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// SidecarOptions say how to start one `gatekeeper serve`.
type SidecarOptions struct {
	// Binary is bin/gatekeeper.
	Binary string
	// Dir is the harness's work directory; the sidecar's socket, token,
	// audit log and log file go into a subdirectory named Name.
	Dir  string
	Name string
	// Policy is the policy file to serve.
	Policy string
	// Args are extra flags, such as a pool size.
	Args []string
	// Env are extra environment variables, such as GODEBUG=gctrace=1.
	Env []string
}

// Sidecar is a running `gatekeeper serve` with its own socket, token and
// audit log.
type Sidecar struct {
	*Process
	Token     string
	TokenFile string
	AuditLog  string
}

// StartSidecar starts a sidecar labelling its containers "bench-<Name>" and
// waits until it answers /healthz.
func StartSidecar(ctx context.Context, o SidecarOptions) (*Sidecar, error) {
	dir := filepath.Join(o.Dir, o.Name)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	s := &Sidecar{TokenFile: filepath.Join(dir, "token"), AuditLog: filepath.Join(dir, "audit.jsonl")}
	socket := filepath.Join(dir, "gk.sock")
	argv := append([]string{o.Binary, "serve",
		"--listen", "unix://" + socket,
		"--policy", o.Policy,
		"--token-file", s.TokenFile,
		"--audit-log", s.AuditLog,
		"--instance", "bench-" + o.Name,
		"--watch-interval", "0",
		"--log-level", "warn",
	}, o.Args...)
	// The queries' workspaces go into dir too (the default --state-dir is
	// under XDG_STATE_HOME).
	env := append([]string{"XDG_STATE_HOME=" + dir}, o.Env...)
	p, err := Start(ctx, "gatekeeper serve ("+o.Name+")", socket, "/healthz", filepath.Join(dir, "serve.log"), argv, env)
	if err != nil {
		return nil, err
	}
	s.Process = p
	tok, err := os.ReadFile(s.TokenFile)
	if err != nil {
		p.Stop()
		return nil, fmt.Errorf("read the sidecar's token: %w", err)
	}
	s.Token = strings.TrimSpace(string(tok))
	return s, nil
}

// StartOPA starts `opa run --server` on a Unix socket in dir, serving the
// given Rego files, with telemetry and decision logs off.
func StartOPA(ctx context.Context, opaBin, dir string, rego ...string) (*Process, error) {
	socket := filepath.Join(dir, "opa.sock")
	argv := append([]string{opaBin, "run", "--server", "--addr", "unix://" + socket,
		"--disable-telemetry", "--log-level", "error"}, rego...)
	return Start(ctx, "opa run --server", socket, "/health", filepath.Join(dir, "opa.log"), argv, nil)
}

// HelpMentions reports whether `bin help` output contains word: how the
// harness finds out whether the sidecar has a feature (a warm pool).
func HelpMentions(ctx context.Context, bin string, args []string, word string) (bool, string, error) {
	out, err := exec.CommandContext(ctx, bin, args...).CombinedOutput()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return false, "", err
	}
	return strings.Contains(string(out), word), string(out), nil
}
