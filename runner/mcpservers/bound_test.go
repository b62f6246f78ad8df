package mcpservers_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os/exec"
	"runtime"
	"runtime/metrics"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/policy"
	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers"
	"github.com/gatekeeper-ai/gatekeeper/runner/mcpservers/mcptest"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

// marker is in the command, the URL and the error text of the servers of
// TestAFailedServerShowsNothingOfTheOperators; nothing a program or the
// model sees may hold it.
const marker = "opsmarker7f3e"

// TestAFailedServerShowsNothingOfTheOperators: a server that cannot be
// started (its command carries the marker), one that cannot be reached
// (its URL does) and one that answers its initialize with an error of its
// own (its text does) fail each call, listing and description with their name, kind and a reason
// in gatekeeper's words; the raw error, marker included, is in the error's
// detail (for the audit line) and in the sidecar's log.
func TestAFailedServerShowsNothingOfTheOperators(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	s, logs := start(t, mcpservers.Options{},
		mcpservers.Config{Name: "nocmd", Command: []string{dir + "/" + marker + "/bin/internal-mcp", "--token=" + marker}},
		mcpservers.Config{Name: "nourl", URL: "http://127.0.0.1:9/" + marker + "/mcp"},
		mcpservers.Config{Name: "says", Command: []string{"sh", "-c", `while read line; do id=$(echo "$line" | sed 's/.*"id":\([0-9]*\).*/\1/'); echo '{"jsonrpc":"2.0","id":'$id',"error":{"code":-32000,"message":"cannot open /etc/` + marker + `.conf"}}'; done`}},
	)
	names := []string{"nocmd", "nourl", "says"}
	check := func(what string, err error) {
		t.Helper()
		var se *runner.ServerError
		switch {
		case !errors.As(err, &se) || !errors.Is(err, mcpservers.ErrUnavailable):
			t.Errorf("%s: %v, want a ServerError of kind ErrUnavailable", what, err)
		case strings.Contains(err.Error(), marker):
			t.Errorf("%s: the error the program sees holds the operator's marker: %v", what, err)
		case !strings.Contains(err.Error(), `mcp server "`+se.Server+`"`) || !strings.Contains(err.Error(), "could not be"):
			t.Errorf("%s: %v, want the server's name and why in gatekeeper's words", what, err)
		case !strings.Contains(runner.ServerErrorDetail(err), marker):
			t.Errorf("%s: the detail for the audit line lacks the raw error: %s", what, runner.ServerErrorDetail(err))
		}
	}
	for _, name := range names {
		_, err := s.CallTool(t.Context(), name, "lookup", json.RawMessage(`{"id": 1}`))
		check(name+" call", err)
		_, _, err = s.Tool(t.Context(), name, "lookup")
		check(name+" tool", err)
	}
	list, err := s.List(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, st := range list {
		check(st.Name+" listing", st.Err)
	}
	desc := toolwrap.Describe("Run code.", list)
	if strings.Contains(desc, marker) || strings.Count(desc, "unavailable now") != len(names) {
		t.Errorf("the description the model reads:\n%s", desc)
	}
	for _, name := range names {
		if !strings.Contains(logs.String(), "mcp_server="+name) {
			t.Errorf("the log does not name %s:\n%s", name, logs)
		}
	}
	if strings.Count(logs.String(), marker) < len(names) {
		t.Errorf("the log lacks the raw errors:\n%s", logs)
	}
}

// httpServerProcess starts mcptestserver over streamable HTTP in its own
// process (so that its memory is not the test's) and returns its config.
func httpServerProcess(t *testing.T, name string) mcpservers.Config {
	t.Helper()
	cmd := exec.Command(stdioBin, "-name", name, "-records", "5", "-listen", "127.0.0.1:0")
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil || !strings.HasPrefix(line, "URL=") {
		t.Fatalf("mcptestserver -listen: %q, %v", line, err)
	}
	return mcpservers.Config{Name: name, URL: strings.TrimSpace(strings.TrimPrefix(line, "URL="))}
}

// TestMemoryStaysWithinAMultipleOfTheBound measures the sidecar's heap
// while inFlight calls at once get results just within the bound (read
// whole) and ten times past it (not read to the end), over stdio and over
// HTTP (both servers in their own processes): the peak of heap objects
// above the baseline stays within maxMultiple × bound × inFlight. It is
// the figure docs/SANDBOX.md states; run with -v to see it.
func TestMemoryStaysWithinAMultipleOfTheBound(t *testing.T) {
	// Not parallel: the heap measured is this test's alone.
	const (
		bound       = 4 << 20
		inFlight    = 4
		maxMultiple = 10
	)
	s, _ := start(t, mcpservers.Options{MaxResultBytes: bound}, mcptest.Stdio(stdioBin, "crm", 5, nil), httpServerProcess(t, "billing"))
	for _, server := range []string{"crm", "billing"} {
		call(t, s, server, "pid", `{}`) // connected before the baseline
		for _, c := range []struct {
			name    string
			bytes   int
			tooLong bool
		}{
			{"within the bound", bound * 9 / 10, false},
			{"ten times past it", bound * 10, true},
		} {
			peak := heapPeak(t, func() {
				var wg sync.WaitGroup
				results := make([]json.RawMessage, inFlight)
				for i := range inFlight {
					wg.Go(func() {
						ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
						defer cancel()
						raw, err := s.CallTool(ctx, server, "big", json.RawMessage(fmt.Sprintf(`{"bytes": %d}`, c.bytes)))
						if c.tooLong != errors.Is(err, runner.ErrResultTooLarge) || (err != nil && !c.tooLong) {
							t.Errorf("%s %s: %v", server, c.name, err)
						}
						results[i] = raw // held until all have answered, as calls in flight are
					})
				}
				wg.Wait()
				runtime.KeepAlive(results)
			})
			multiple := float64(peak) / float64(bound*inFlight)
			t.Logf("%s, %d calls %s: heap peak %.1f MiB above the baseline, %.2f x bound x in flight", server, inFlight, c.name, float64(peak)/(1<<20), multiple)
			if multiple > maxMultiple {
				t.Errorf("%s, %s: heap peak %.2f x bound x in flight, want at most %d", server, c.name, multiple, maxMultiple)
			}
		}
	}
}

// heapPeak runs f and returns the peak of the heap's objects above what
// they were before, sampled every 100µs.
func heapPeak(t *testing.T, f func()) uint64 {
	t.Helper()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	read := func() uint64 { metrics.Read(sample); return sample[0].Value.Uint64() }
	runtime.GC()
	base := read()
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			if v := read(); v > peak.Load() {
				peak.Store(v)
			}
			select {
			case <-done:
				return
			case <-time.After(100 * time.Microsecond):
			}
		}
	})
	f()
	close(done)
	wg.Wait()
	if p := peak.Load(); p > base {
		return p - base
	}
	return 0
}

// TestDefaultBoundIsThePolicysHardBound: the client's default bound is the
// largest code_calls.max_result_bytes a policy may set.
func TestDefaultBoundIsThePolicysHardBound(t *testing.T) {
	t.Parallel()
	if mcpservers.DefaultMaxResultBytes != policy.MaxCodeCallResultSize {
		t.Errorf("DefaultMaxResultBytes %d, policy.MaxCodeCallResultSize %d", mcpservers.DefaultMaxResultBytes, policy.MaxCodeCallResultSize)
	}
}
