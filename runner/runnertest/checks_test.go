package runnertest

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// recorder is a tb that records failures instead of failing the test.
type recorder struct {
	failures []string
	logs     []string
}

type fatal struct{}

func (r *recorder) Helper()           {}
func (r *recorder) Error(args ...any) { r.failures = append(r.failures, fmt.Sprint(args...)) }
func (r *recorder) Errorf(f string, args ...any) {
	r.failures = append(r.failures, fmt.Sprintf(f, args...))
}
func (r *recorder) Logf(f string, args ...any)   { r.logs = append(r.logs, fmt.Sprintf(f, args...)) }
func (r *recorder) Fatalf(f string, args ...any) { r.Errorf(f, args...); panic(fatal{}) }
func (r *recorder) run(check func(tb, runner.Result), res runner.Result) {
	defer func() {
		if p := recover(); p != nil {
			if _, ok := p.(fatal); !ok {
				panic(p)
			}
		}
	}()
	check(r, res)
}

// TestChecksCanFail feeds every result check the result of a sandbox that
// enforces nothing, or of a program that did not run: each must fail.
func TestChecksCanFail(t *testing.T) {
	t.Parallel()
	// What an unconfined process on the host would print for the probes.
	permissive := map[string]string{
		"writes to the root file system and /deps fail with EROFS":                                        "/var/tmp/x ok\n/deps/new ok\n/deps/dep.txt ok\n/x ok\n/etc/x ok\n/usr/x ok\n/usr/bin/python3 ok\nmkdir /usr/d ok\ndependency\n",
		"writes to the root file system fail with EROFS":                                                  "/var/tmp/x ok\n/x ok\n/etc/x ok\n/usr/x ok\n/usr/bin/python3 ok\nmkdir /usr/d ok\n",
		"the program runs as the policy's uid and gid and owns what it writes in a root-owned /workspace": "0\n0\n0:0 1777\n0:0\n",
		"filling /tmp stops at its size with ENOSPC":                                                      "ENOSPC 1024\n",
		"there is no network interface but loopback and connects fail with ENETUNREACH":                   "interfaces eth0,lo\ntcp 192.0.2.1 timeout\ntcp 198.51.100.1 ECONNREFUSED\nudp 203.0.113.1 ok\n",
		"the program runs as the policy's uid and gid and owns /workspace":                                "0\n0\n0:0\n0:0\n",
		"the program has no capabilities and no new privileges":                                           "CapInh 0000000000000000\nCapPrm 000001ffffffffff\nCapEff 000001ffffffffff\nCapBnd 000001ffffffffff\nCapAmb 0000000000000000\nNoNewPrivs 0\n",
		"there is no Docker socket anywhere":                                                              "sockets: ['/var/run/docker.sock']\n",
		"the environment is PATH, HOME and LANG only and holds nothing of the host":                       "['GATEKEEPER_TEST_SECRET', 'HOME', 'LANG', 'PATH']\n/root C.UTF-8\nleaks ['/proc/1/environ']\n",
		"an endless loop is killed at the timeout":                                                        "",
		"a memory bomb is OOM-killed":                                                                     "",
	}
	for _, tc := range allOutcomeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			results := map[string]runner.Result{
				"a program that never ran": {Reason: runner.Exited, ExitCode: 0, Runtime: runner.Runc, Duration: time.Millisecond},
				"a crashed program":        {Reason: runner.Exited, ExitCode: 2, Stderr: "Traceback", Runtime: runner.Runc},
			}
			if out, ok := permissive[tc.name]; ok {
				results["an unconfined host process"] = runner.Result{Reason: runner.Exited, ExitCode: 0, Stdout: out, Runtime: runner.Runc, Duration: time.Second}
			}
			if strings.Contains(tc.name, "timeout") {
				results["a run that ended by itself"] = runner.Result{Reason: runner.Exited, ExitCode: 0, Duration: 3 * time.Second, Runtime: runner.Runc}
			}
			if strings.Contains(tc.name, "memory bomb") {
				results["a bomb that was not killed"] = runner.Result{Reason: runner.Exited, ExitCode: 0, Runtime: runner.Runc}
				results["runc not reporting the OOM"] = runner.Result{Reason: runner.Exited, ExitCode: 137, Runtime: runner.Runc}
				results["a bomb above the limit"] = runner.Result{Reason: runner.OOMKilled, ExitCode: 137, PeakMemoryBytes: 1 << 30, Runtime: runner.Runc}
				results["a bomb past the limit by more than a dying task's charges"] = runner.Result{Reason: runner.OOMKilled, ExitCode: 137, PeakMemoryBytes: 66 << 20, Runtime: runner.Runsc}
			}
			for what, res := range results {
				rec := &recorder{}
				rec.run(tc.check, res)
				if len(rec.failures) == 0 {
					t.Errorf("the check passes %s: %+v", what, res)
				}
			}
		})
	}
}

// TestChecksPassWhatTheySpecify makes sure the checks are not impossible:
// the results the suite expects pass them.
func TestChecksPassWhatTheySpecify(t *testing.T) {
	t.Parallel()
	good := map[string]runner.Result{
		"hello world prints and exits 0": {Reason: runner.Exited, Stdout: "hello, world\n", Image: "i", Runtime: runner.Runc, Duration: time.Second},
		// The high-water mark a page past the limit, as seen under gVisor.
		"a memory bomb is OOM-killed":                {Reason: runner.OOMKilled, ExitCode: 137, PeakMemoryBytes: 64<<20 + 4096, Runtime: runner.Runsc},
		"an endless loop is killed at the timeout":   {Reason: runner.TimedOut, ExitCode: 137, Duration: 2500 * time.Millisecond, Runtime: runner.Runc},
		"filling /tmp stops at its size with ENOSPC": {Reason: runner.Exited, Stdout: "ENOSPC 7\n", Runtime: runner.Runc},
		"writes to the root file system and /deps fail with EROFS": {Reason: runner.Exited, Runtime: runner.Runsc,
			Stdout: "/var/tmp/x EROFS\n/deps/new EROFS\n/deps/dep.txt EROFS\n/x EACCES\n/etc/x EACCES\n/usr/x EACCES\n/usr/bin/python3 EACCES\nmkdir /usr/d EROFS\ndependency\n"},
		"writes to the root file system fail with EROFS": {Reason: runner.Exited, Runtime: runner.Runc,
			Stdout: "/var/tmp/x EROFS\n/x EROFS\n/etc/x EROFS\n/usr/x EROFS\n/usr/bin/python3 EROFS\nmkdir /usr/d EROFS\n"},
		"the program runs as the policy's uid and gid and owns /workspace": {Reason: runner.Exited, Runtime: runner.Runc,
			Stdout: "12345\n23456\n12345:23456\n12345:23456\n"},
		"the program runs as the policy's uid and gid and owns what it writes in a root-owned /workspace": {Reason: runner.Exited, Runtime: runner.Runc,
			Stdout: "12345\n23456\n0:0 1777\n12345:23456\n"},
	}
	cases := map[string]outcomeCase{}
	for _, tc := range allOutcomeCases() {
		cases[tc.name] = tc
	}
	for name, res := range good {
		tc, ok := cases[name]
		if !ok {
			t.Errorf("no case %q", name)
			continue
		}
		rec := &recorder{}
		rec.run(tc.check, res)
		if len(rec.failures) != 0 {
			t.Errorf("%s: the expected result fails: %v", name, rec.failures)
		}
	}
}

// allOutcomeCases are the cases of every Options, each once.
func allOutcomeCases() []outcomeCase {
	seen := map[string]bool{}
	var out []outcomeCase
	for _, o := range []Options{{}, {NoHostDeps: true, RootOwnedWorkspace: true}} {
		for _, tc := range outcomeCases("/nonexistent", o) {
			if !seen[tc.name] {
				seen[tc.name] = true
				out = append(out, tc)
			}
		}
	}
	return out
}
