package soak

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/bench"
)

// Sidecar is the `gatekeeper serve` under soak, started in the engine's
// network namespace (its sandbox networks' bridges and firewall are
// there) with DOCKER_HOST pointing at the soak's engine. It can be killed
// and started again with the same flags: the same instance, token and
// audit log.
type Sidecar struct {
	Socket, TokenFile, Token string
	Log                      string // its output, across restarts
	argv, env                []string
	proc                     *bench.Process
	http                     *http.Client
	starts                   int
}

// StartSidecar starts the sidecar and waits until it answers /healthz.
func StartSidecar(ctx context.Context, argv, env []string, socket, tokenFile, log string) (*Sidecar, error) {
	s := &Sidecar{Socket: socket, TokenFile: tokenFile, Log: log, argv: argv, env: env, http: bench.UnixHTTPClient(socket, 2)}
	if err := s.Start(ctx); err != nil {
		return nil, err
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		s.Stop()
		return nil, fmt.Errorf("read the sidecar's token: %w", err)
	}
	s.Token = strings.TrimSpace(string(tok))
	return s, nil
}

// Start starts (or starts again) the process; its output is appended to
// Log, each start under a header line.
func (s *Sidecar) Start(ctx context.Context) error {
	s.starts++
	logf := fmt.Sprintf("%s.%d", s.Log, s.starts)
	p, err := bench.Start(ctx, "gatekeeper serve", s.Socket, "/healthz", logf, s.argv, s.env)
	if err != nil {
		return err
	}
	s.proc = p
	return nil
}

// Logs returns the output of every start so far, oldest first.
func (s *Sidecar) Logs() string {
	var b strings.Builder
	for i := 1; i <= s.starts; i++ {
		data, _ := os.ReadFile(fmt.Sprintf("%s.%d", s.Log, i))
		fmt.Fprintf(&b, "--- start %d ---\n%s", i, data)
	}
	return b.String()
}

// LogFiles names the files of every start.
func (s *Sidecar) LogFiles() []string {
	var out []string
	for i := 1; i <= s.starts; i++ {
		out = append(out, fmt.Sprintf("%s.%d", s.Log, i))
	}
	return out
}

// PID is the running process's id.
func (s *Sidecar) PID() int { return s.proc.PID() }

// Kill sends SIGKILL and waits for the process to go.
func (s *Sidecar) Kill() {
	_ = s.proc.Signal(syscall.SIGKILL)
	<-s.proc.Done()
}

// Stop ends the sidecar with SIGTERM (it removes its containers), killing
// it after 60 s. It returns the exit error.
func (s *Sidecar) Stop() error {
	_ = s.proc.Signal(syscall.SIGTERM)
	select {
	case <-s.proc.Done():
		return s.proc.Err()
	case <-time.After(60 * time.Second):
		s.Kill()
		return fmt.Errorf("the sidecar did not stop within 60 s of SIGTERM; killed")
	}
}

// Dialer connects to the sidecar.
func (s *Sidecar) Dialer() Dialer { return Dialer{Socket: s.Socket, Token: s.Token} }

// Revision is the policy revision /healthz reports.
func (s *Sidecar) Revision(ctx context.Context) (string, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gatekeeper/healthz", nil)
	resp, err := s.http.Do(req)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	var h struct {
		Revision string `json:"policy_revision"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&h); err != nil {
		return "", err
	}
	return h.Revision, nil
}

// Metrics are the samples of /metrics the soak follows (the last value of
// each unlabelled series; labelled ones summed).
type Metrics map[string]float64

// Metrics reads /metrics.
func (s *Sidecar) Metrics(ctx context.Context) (Metrics, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://gatekeeper/metrics", nil)
	req.Header.Set("Authorization", "Bearer "+s.Token)
	resp, err := s.http.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		return nil, fmt.Errorf("/metrics: %s: %s", resp.Status, b)
	}
	return parseMetrics(resp.Body)
}

func parseMetrics(r io.Reader) (Metrics, error) {
	m := Metrics{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		if i < 0 {
			continue
		}
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			continue
		}
		name := line[:i]
		if j := strings.IndexByte(name, '{'); j >= 0 {
			m[name] = v // the labelled series itself
			name = name[:j]
		}
		m[name] += v
	}
	return m, sc.Err()
}

// Sample is one reading of the sidecar's resources.
type Sample struct {
	At         time.Time
	Goroutines float64
	FDs        float64
	RSS        int64
	HeapInuse  float64
	HeapAlloc  float64 // live heap right after a collection (see gcAndSample)
	Conns      float64
	Queries    float64
	Warm       float64
}

// Sample reads the sidecar's goroutines, fds and heap from /metrics and
// its RSS from /proc.
func (s *Sidecar) Sample(ctx context.Context) (Sample, error) {
	m, err := s.Metrics(ctx)
	if err != nil {
		return Sample{}, err
	}
	mem, err := bench.ReadMemory(s.PID())
	if err != nil {
		return Sample{}, err
	}
	return Sample{
		At: time.Now(), Goroutines: m["go_goroutines"], FDs: m["process_open_fds"], RSS: mem.RSS,
		HeapInuse: m["go_memstats_heap_inuse_bytes"], HeapAlloc: m["go_memstats_heap_alloc_bytes"], Conns: m["gatekeeper_connections_open"],
		Queries: m["gatekeeper_queries_open"], Warm: m["gatekeeper_pool_warm_containers"],
	}, nil
}
