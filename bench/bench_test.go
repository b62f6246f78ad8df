package bench_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/open-policy-agent/opa/v1/ast"
	oparego "github.com/open-policy-agent/opa/v1/rego"
	"github.com/open-policy-agent/opa/v1/topdown"

	"github.com/gatekeeper-ai/gatekeeper/bench"
	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/server"
	builtin "github.com/gatekeeper-ai/gatekeeper/rego"
)

// BenchmarkSidecarDecide serves the shipped policy in-process exactly as
// `gatekeeper serve` wires it (gate engine, audit log, WebSocket server on
// a Unix socket) and drives it with N connections, each one decide at a
// time, as the throughput row does against the real binary. It exists to
// be profiled:
//
//	go test ./bench -run '^$' -bench 'SidecarDecide/conns=64' -cpuprofile cpu.prof
//	go tool pprof -top -tagignore side=client bench.test cpu.prof
//
// The client goroutines carry the pprof label side=client, so the second
// command shows the server's CPU alone.
func BenchmarkSidecarDecide(b *testing.B) {
	for _, conns := range []int{1, 64} {
		b.Run(fmt.Sprintf("conns=%d", conns), func(b *testing.B) {
			sock, token, file := startServer(b)
			frame := func(q string) []byte {
				return []byte(fmt.Sprintf(`{"type":"decide","id":"b","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"toolu_1"}`, q, file))
			}
			clients := make([]*bench.Client, conns)
			frames := make([][]byte, conns)
			for i := range clients {
				c, err := bench.Dial(b.Context(), sock, token)
				if err != nil {
					b.Fatal(err)
				}
				defer c.Close()
				q, _, err := c.OpenQuery(nil)
				if err != nil {
					b.Fatal(err)
				}
				clients[i], frames[i] = c, frame(q)
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			errs := make(chan error, conns)
			b.ResetTimer()
			for i, c := range clients {
				wg.Add(1)
				go pprof.Do(context.Background(), pprof.Labels("side", "client"), func(context.Context) {
					defer wg.Done()
					for left.Add(-1) >= 0 {
						if _, err := c.RoundTrip(frames[i]); err != nil {
							errs <- err
							return
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "decisions/s")
		})
	}
}

// startServer serves the shipped policy on a Unix socket until the
// benchmark ends, and returns the socket, the token and a workspace file.
func startServer(b *testing.B) (sock, token, file string) {
	b.Helper()
	dir := b.TempDir()
	shipped, err := os.ReadFile(filepath.Join("..", "sandbox.policy.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	policyFile, err := bench.WritePolicy(shipped, dir, "runc", "runc")
	if err != nil {
		b.Fatal(err)
	}
	file = filepath.Join(dir, "workspace", "notes.txt")
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("notes\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	eng, err := gate.New(b.Context(), gate.Config{PolicyFile: policyFile, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	alog, err := audit.Open(filepath.Join(dir, "audit.jsonl"), audit.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { alog.Close() })
	token = "bench-token"
	srv, err := server.New(server.Config{Engine: eng, Auditor: alog, Token: token, Logger: quiet})
	if err != nil {
		b.Fatal(err)
	}
	sock = filepath.Join(dir, "gk.sock")
	ln, err := server.Listen("unix://"+sock, false)
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = srv.Serve(ctx, ln)
	}()
	b.Cleanup(func() {
		cancel()
		<-done
	})
	return sock, token, file
}

// BenchmarkRegoDecision evaluates data.gatekeeper.decision in-process with
// OPA's rego package, prepared once as the gate prepares it (and evaluated
// with the options the gate passes), for the exact input the sidecar
// builds for a Read inside the workspace, and for that input with parts
// taken away: what each part of the policy costs per decision, with no
// server, audit log or I/O around it.
//
// Besides ns/op (wall time, which a busy machine inflates) it reports
// cpu-ns/op: the process's CPU time (all threads, the collector's too)
// per evaluation, which holds on a shared machine.
//
// REGO_VARIANTS=dir1,dir2 adds the same cases for policies whose
// gatekeeper.rego and core.rego are replaced by those in each directory
// (a missing file stays as built): how a rule's shape was measured.
func BenchmarkRegoDecision(b *testing.B) {
	input := sidecarInput(b)
	variants := []string{""}
	if v := os.Getenv("REGO_VARIANTS"); v != "" {
		variants = append(variants, strings.Split(v, ",")...)
	}
	for _, dir := range variants {
		mods, err := builtin.Builtin()
		if err != nil {
			b.Fatal(err)
		}
		for _, f := range []string{"gatekeeper.rego", "core.rego"} {
			if dir == "" {
				break
			}
			if src, err := os.ReadFile(filepath.Join(dir, f)); err == nil {
				mods["rego/"+f] = string(src)
			}
		}
		c, err := builtin.Compile(mods)
		if err != nil {
			b.Fatal(err)
		}
		pq, err := oparego.New(oparego.Query("data.gatekeeper.decision"), oparego.Compiler(c), oparego.StrictBuiltinErrors(true)).PrepareForEval(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		for _, v := range []struct {
			name   string
			change func(map[string]any)
		}{
			{"as built", func(map[string]any) {}},
			{"no deny globs", func(in map[string]any) { in["deny_globs"] = []any{} }},
			{"denied tool, no paths", func(in map[string]any) { in["tool_name"], in["tool_kind"], in["paths"] = "Bash", "other", []any{} }},
		} {
			name := v.name
			if dir != "" {
				name = filepath.Base(dir) + ": " + name
			}
			b.Run(name, func(b *testing.B) {
				in := maps.Clone(input)
				v.change(in)
				val, err := ast.InterfaceToValue(in)
				if err != nil {
					b.Fatal(err)
				}
				b.ReportAllocs()
				cpu0 := processCPU()
				for b.Loop() {
					rs, err := pq.Eval(b.Context(), oparego.EvalParsedInput(val), oparego.EvalExternalCancel(topdown.NewCancel()))
					if err != nil || len(rs) != 1 {
						b.Fatalf("eval: %v, %d results", err, len(rs))
					}
				}
				b.ReportMetric(float64(processCPU()-cpu0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// processCPU is the CPU time (user and system) this process has used.
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// sidecarInput is the Rego input the gate builds for a Read inside the
// workspace, handed back by an extra rule as its reason (as RegoInput does
// through the CLI).
func sidecarInput(b *testing.B) map[string]any {
	b.Helper()
	dir := b.TempDir()
	shipped, err := os.ReadFile(filepath.Join("..", "sandbox.policy.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	policyFile, err := bench.WritePolicy(shipped, dir, "runc", "runc")
	if err != nil {
		b.Fatal(err)
	}
	file := filepath.Join(dir, "workspace", "notes.txt")
	regoDir := filepath.Join(dir, "rego.d")
	for _, d := range []string{filepath.Dir(file), regoDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.Fatal(err)
		}
	}
	if err := os.WriteFile(file, []byte("notes\n"), 0o644); err != nil {
		b.Fatal(err)
	}
	dump := "package gatekeeper\n\ndeny contains {\"rule\": \"bench.dump_input\", \"reason\": json.marshal(input)} if input.tool_use_id == \"dump\"\n"
	if err := os.WriteFile(filepath.Join(regoDir, "dump.rego"), []byte(dump), 0o644); err != nil {
		b.Fatal(err)
	}
	eng, err := gate.New(b.Context(), gate.Config{PolicyFile: policyFile, RegoDir: regoDir, Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	if err != nil {
		b.Fatal(err)
	}
	q, err := eng.OpenQuery(b.Context(), "q", nil)
	if err != nil {
		b.Fatal(err)
	}
	raw, _ := json.Marshal(map[string]string{"file_path": file})
	d, err := q.Decide(b.Context(), gate.Call{Event: gate.EventPreToolUse, ToolName: "Read", ToolInput: raw, ToolUseID: "dump"})
	if err != nil || d.Rule != "bench.dump_input" {
		b.Fatalf("dump: %v, rule %s", err, d.Rule)
	}
	var input map[string]any
	if err := json.Unmarshal([]byte(d.Reason), &input); err != nil {
		b.Fatal(err)
	}
	input["tool_use_id"] = "toolu_1"
	return input
}
