package soak

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"strings"
)

// Variant is a policy the soak serves. Every decision carries the
// revision that decided it, and is checked against the variant of that
// revision: a decision that matches neither, or the other one, was
// evaluated against a mix.
type Variant string

const (
	// Base allows the host file tools in the workspace and the sandbox.
	Base Variant = "base"
	// Strict, swapped in under load, no longer allows Write and Edit, and
	// caps sandbox output at 256 KiB instead of 1 MiB.
	Strict Variant = "strict"
)

// outputCap is sandbox.output.max_bytes of each variant.
var outputCap = map[Variant]int64{Base: 1 << 20, Strict: 256 << 10}

// policyYAML is the soak's policy file of variant v, its workspace at ws.
func policyYAML(v Variant, ws string) string {
	allow := "[Read, Write, Edit, Glob, Grep, LS, WebFetch, mcp__sandboxed_code__run]"
	if v == Strict {
		allow = "[Read, Glob, Grep, LS, WebFetch, mcp__sandboxed_code__run]"
	}
	return fmt.Sprintf(`# The soak's policy (%s), written by bench/soak.
version: 1
workspace_root: %s
tools:
  allow: %s
  deny: [Bash, WebSearch]
sandbox:
  fs:
    deny: ["~/.ssh/**", "**/.env", "~/.*"]
  net: {enabled: false}
  proc: {cpus: 1, memory: 256m, pids: 128, timeout: 10s, runtime: runc}
  output: {max_bytes: %d}
ceilings: {cpus: 2, memory: 1g, pids: 512, timeout: 60s, tmpfs: 512m, output_bytes: 8m, net_hosts: [%q], runtimes: [runc, runsc]}
`, v, ws, allow, outputCap[v], netHost)
}

// brokenPolicy is a policy file the sidecar must refuse: an unknown key,
// which strict decoding names with its line.
func brokenPolicy(ws string) string {
	return strings.Replace(policyYAML(Base, ws), "tools:\n", "tools:\n  alow: [Bash]\n", 1)
}

// netHost is the only host the networked runs may ask for; it does not
// resolve, and the runs ask the proxy for another one anyway.
const netHost = "allowed.soak.invalid"

// World is the host side of the soak: the workspace the policy names and
// the home directory the sidecar runs with.
type World struct {
	WS, Home string
}

// Action is one tool call of a decider session, with what each variant
// decides about it.
type Action struct {
	Name   string
	Tool   string
	Weight int
	Input  func(w World, i int) map[string]any
	Want   map[Variant]Want
}

// Want is an expected decision.
type Want struct{ Decision, Rule string }

func same(w Want) map[Variant]Want { return map[Variant]Want{Base: w, Strict: w} }

// Actions is the deciders' mix: host file calls inside and outside the
// workspace, secrets, denied and unknown tools, a fetch with the network
// off.
var Actions = []Action{
	{Name: "read_in", Tool: "Read", Weight: 25,
		Input: func(w World, i int) map[string]any {
			return map[string]any{"file_path": filepath.Join(w.WS, fmt.Sprintf("f%d.txt", i%8))}
		},
		Want: same(Want{"allow", "host_fs.inside_workspace"})},
	{Name: "write_in", Tool: "Write", Weight: 10,
		Input: func(w World, i int) map[string]any {
			return map[string]any{"file_path": filepath.Join(w.WS, "out", fmt.Sprintf("o%d.txt", i)), "content": "soak"}
		},
		Want: map[Variant]Want{Base: {"allow", "host_fs.inside_workspace"}, Strict: {"deny", "tools.not_allowlisted"}}},
	{Name: "grep_in", Tool: "Grep", Weight: 8,
		Input: func(w World, _ int) map[string]any { return map[string]any{"pattern": "soak", "path": w.WS} },
		Want:  same(Want{"allow", "host_fs.inside_workspace"})},
	{Name: "glob_in", Tool: "Glob", Weight: 7,
		Input: func(w World, _ int) map[string]any { return map[string]any{"pattern": "**/*.txt"} },
		Want:  same(Want{"allow", "host_fs.inside_workspace"})},
	{Name: "read_out", Tool: "Read", Weight: 15,
		Input: func(w World, _ int) map[string]any { return map[string]any{"file_path": "/etc/passwd"} },
		Want:  same(Want{"deny", "host_fs.outside_workspace"})},
	{Name: "read_ssh", Tool: "Read", Weight: 5,
		Input: func(w World, _ int) map[string]any {
			return map[string]any{"file_path": filepath.Join(w.Home, ".ssh", "id_rsa")}
		},
		Want: same(Want{"deny", "host_fs.deny_glob"})},
	{Name: "bash", Tool: "Bash", Weight: 15,
		Input: func(w World, i int) map[string]any {
			return map[string]any{"command": fmt.Sprintf("cat /etc/shadow # %d", i)}
		},
		Want: same(Want{"deny", "tools.deny_list"})},
	{Name: "unknown_tool", Tool: "FrobnicateTool", Weight: 5,
		Input: func(w World, _ int) map[string]any { return map[string]any{} },
		Want:  same(Want{"deny", "tools.not_allowlisted"})},
	{Name: "webfetch", Tool: "WebFetch", Weight: 5,
		Input: func(w World, _ int) map[string]any {
			return map[string]any{"url": "http://example.com/", "prompt": "summarize"}
		},
		Want: same(Want{"deny", "net.disabled"})},
}

// actionByName finds an action of Actions.
func actionByName(name string) *Action {
	for i := range Actions {
		if Actions[i].Name == name {
			return &Actions[i]
		}
	}
	return nil
}

// pick draws an action by weight.
func pick(r *rand.Rand) *Action { return weighted(r, Actions, func(a *Action) int { return a.Weight }) }

// weighted draws one of items, each as likely as its weight.
func weighted[T any](r *rand.Rand, items []T, weight func(*T) int) *T {
	total := 0
	for i := range items {
		total += weight(&items[i])
	}
	n := r.IntN(total)
	for i := range items {
		if n < weight(&items[i]) {
			return &items[i]
		}
		n -= weight(&items[i])
	}
	return &items[len(items)-1]
}

// RunKind is one kind of sandboxed run of a runner session.
type RunKind struct {
	Name      string
	Weight    int
	Language  string
	Code      string
	TimeoutMS int  // 0: the policy's
	Net       bool // in a query whose override turns the network on
	// Check says what is wrong with a run_result of this kind under
	// variant v ("" when nothing).
	Check func(f Frame, v Variant) string
}

// Runs is the runner sessions' mix: hello world, a CPU-bound second, an
// output flood, a memory bomb, a run past its timeout, and a networked run
// whose request the egress proxy refuses.
var Runs = []RunKind{
	{Name: "hello", Weight: 40, Language: "python", Code: `print("hello soak")`,
		Check: func(f Frame, _ Variant) string {
			return expectRun(f, "exited", 0, f.Stdout == "hello soak\n", "stdout \"hello soak\\n\"")
		}},
	{Name: "cpu_second", Weight: 15, Language: "python",
		Code: "import time\nt = time.time()\nn = 0\nwhile time.time() - t < 1:\n    n += 1\nprint(n > 0)",
		Check: func(f Frame, _ Variant) string {
			return expectRun(f, "exited", 0, f.Stdout == "True\n", "stdout \"True\\n\"")
		}},
	{Name: "output_flood", Weight: 12, Language: "python",
		Code: "import sys\nb = 'x' * 65535 + '\\n'\nfor _ in range(64):\n    sys.stdout.write(b)",
		Check: func(f Frame, v Variant) string {
			return expectRun(f, "exited", 0, f.Truncated && int64(len(f.Stdout)) == outputCap[v],
				fmt.Sprintf("truncated at %d bytes (got %d)", outputCap[v], len(f.Stdout)))
		}},
	{Name: "memory_bomb", Weight: 10, Language: "python",
		Code: "l = []\nwhile True:\n    l.append(b'x' * (16 << 20))",
		Check: func(f Frame, _ Variant) string {
			return expectRun(f, "oom_killed", 137, f.OOMKilled, "oom_killed")
		}},
	{Name: "past_timeout", Weight: 8, Language: "python", Code: "import time\ntime.sleep(30)", TimeoutMS: 1000,
		Check: func(f Frame, _ Variant) string {
			return expectRun(f, "timed_out", 137, f.TimedOut, "timed_out")
		}},
	{Name: "networked", Weight: 8, Language: "python", Net: true,
		// The image has no http module: ask the proxy by hand for a host
		// the policy does not allow, and print its status line.
		Code: "import os, socket\nu = os.environ['HTTP_PROXY'].split('//')[1].rstrip('/')\nh, p = u.rsplit(':', 1)\n" +
			"s = socket.create_connection((h, int(p)), timeout=5)\n" +
			"s.sendall(b'GET http://other.soak.invalid/ HTTP/1.1\\r\\nHost: other.soak.invalid\\r\\n\\r\\n')\n" +
			"print(s.recv(64).split(b'\\r\\n')[0].decode())",
		Check: func(f Frame, _ Variant) string {
			return expectRun(f, "exited", 0, strings.HasPrefix(f.Stdout, "HTTP/1.1 403 gatekeeper egress denied: host \"other.soak.invalid"), "the proxy's 403 naming the host")
		}},
}

func expectRun(f Frame, reason string, code int, ok bool, what string) string {
	if f.Type != "run_result" || f.Reason != reason || f.ExitCode != code || !ok {
		return fmt.Sprintf("want run_result %s, exit %d, %s; got %s %s reason %q exit %d: %.120s", reason, code, what, f.Type, f.Code, f.Reason, f.ExitCode, f.Message+f.Stdout)
	}
	return ""
}

// pickRun draws a run kind by weight.
func pickRun(r *rand.Rand) *RunKind {
	return weighted(r, Runs, func(k *RunKind) int { return k.Weight })
}

// Overrides are the sandbox overrides the sessions open their queries
// with; nil is none.
var Overrides = []map[string]any{
	nil,
	{"proc": map[string]any{"timeout": "20s"}},
	{"proc": map[string]any{"memory": "512m"}, "output": map[string]any{"max_bytes": "2m"}},
}

// netOverride turns the network on for the networked runs.
var netOverride = map[string]any{"net": map[string]any{"enabled": true, "allow": []string{netHost}}}

// rejectedOverride breaks the memory ceiling: open_query must refuse it.
var rejectedOverride = map[string]any{"proc": map[string]any{"memory": "8g"}}
