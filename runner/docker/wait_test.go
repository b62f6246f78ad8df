package docker

import (
	"bytes"
	"context"
	"net"
	"net/http"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	"github.com/docker/docker/api/types/container"
	"github.com/docker/docker/client"
)

// TestAWaitNobodyReadsEndsWithItsSession plays a container that exits
// before its session is closed, its exit unread (a run that ended by its
// end marks, a warm container the engine's restart ended): the engine
// answers the wait at once. The real Docker client's goroutine then holds
// the exit; once the session's context ends, no goroutine of the wait may
// be left. The first case is the client's own channels, to show that the
// count sees the goroutine it guards against (the soak's leak check found
// them after the engine faults, parked in ContainerWait).
func TestAWaitNobodyReadsEndsWithItsSession(t *testing.T) {
	t.Parallel()
	sock := filepath.Join(t.TempDir(), "engine.sock")
	l, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/wait") {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Connection", "close")
		_, _ = w.Write([]byte(`{"StatusCode":3}` + "\n"))
	})}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })

	tests := []struct {
		name string
		keep bool
		left bool // a goroutine of the wait is left after the context ended
	}{
		{"the client's own channels keep a goroutine blocked on the exit nobody reads", false, true},
		{"keepWait's channels leave no goroutine, and keep the exit", true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cli, err := client.NewClientWithOpts(client.WithHost("unix://"+sock), client.WithVersion("1.41"))
			if err != nil {
				t.Fatal(err)
			}
			defer cli.Close()
			label := t.Name()
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			var waitC <-chan container.WaitResponse
			pprof.Do(ctx, pprof.Labels("wait", label), func(ctx context.Context) {
				if tc.keep {
					waitC, _ = keepWait(cli.ContainerWait(ctx, "c1", container.WaitConditionNextExit))
				} else {
					waitC, _ = cli.ContainerWait(ctx, "c1", container.WaitConditionNextExit)
				}
			})
			// The exit is in: held by the client's goroutine (blocked on
			// its send) or kept by keepWait. Only then does the session end.
			held := func() bool {
				if tc.keep {
					return len(waitC) == 1
				}
				// Its own function on top: past the decode, at the send.
				return strings.Contains(topFrame(labelled(t, label)), "ContainerWait.func1")
			}
			for deadline := time.Now().Add(20 * time.Second); !held(); time.Sleep(10 * time.Millisecond) {
				if time.Now().After(deadline) {
					t.Fatalf("the wait's exit never arrived; goroutines of the wait:\n%s", labelled(t, label))
				}
			}
			cancel()
			var stacks string
			// The client's goroutine cannot end: 2 s only show it stays.
			patience := 10 * time.Second
			if tc.left {
				patience = 2 * time.Second
			}
			for deadline := time.Now().Add(patience); ; time.Sleep(10 * time.Millisecond) {
				cli.Close() // its idle connections' goroutines
				stacks = labelled(t, label)
				if stacks == "" || time.Now().After(deadline) {
					break
				}
			}
			if left := stacks != ""; left != tc.left {
				t.Errorf("goroutines of the wait left after its context ended: %v, want %v:\n%s", left, tc.left, stacks)
			}
			if tc.keep {
				if st := <-waitC; st.StatusCode != 3 {
					t.Errorf("kept exit %d, want 3", st.StatusCode)
				}
			}
		})
	}
}

// labelled returns the stacks of this process's goroutines labelled
// wait=label ("" for none).
func labelled(t *testing.T, label string) string {
	t.Helper()
	var b bytes.Buffer
	if err := pprof.Lookup("goroutine").WriteTo(&b, 1); err != nil {
		t.Fatal(err)
	}
	var out []string
	for block := range strings.SplitSeq(b.String(), "\n\n") {
		if strings.Contains(block, `"wait":"`+label+`"`) {
			out = append(out, block)
		}
	}
	return strings.Join(out, "\n\n")
}

// topFrame is the first frame of the first stack in a debug=1 goroutine
// profile (runtime frames are left out there).
func topFrame(stacks string) string {
	for line := range strings.SplitSeq(stacks, "\n") {
		if strings.HasPrefix(line, "#\t") {
			return line
		}
	}
	return ""
}
