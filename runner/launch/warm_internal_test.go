package launch

import (
	goruntime "runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// TestWarmHooksWriteTheReadyMark pins the ready mark the hooks write (a
// copy in Python and in JavaScript) to ReadyMark, and the fifo and the
// go line to the launcher's.
func TestWarmHooksWriteTheReadyMark(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name, hook string
		want       []string // the mark, the fifo's name, the go line
	}{
		{"python", pythonHook, []string{`b"\x1egatekeeper-ready\x1e"`, `"go"`, `b"go\n"`}},
		{"node", nodeHook, []string{`'\x1egatekeeper-ready\x1e'`, `'go'`, `'go\n'`}},
	}
	if ReadyMark != "\x1egatekeeper-ready\x1e" {
		t.Fatalf("ReadyMark is %q: change the hooks with it", ReadyMark)
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			for _, want := range tc.want {
				if !strings.Contains(tc.hook, want) {
					t.Errorf("the %s hook has no %s", tc.name, want)
				}
			}
		})
	}
	if !strings.Contains(script, `mkfifo -m 0600 "$wdir/go"`) || !strings.Contains(script, `printf 'go\n' >&3`) {
		t.Error("the launcher no longer makes the fifo go or writes go on it: change the hooks with it")
	}
}

func TestWarmCheckFindsEveryProblem(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		w    Warm
		want []string // in the error, all of them; none: valid
	}{
		{"nothing started ahead is valid", Warm{}, nil},
		{"python with preloads and reads is valid", Warm{Language: runner.Python, Preload: []string{"numpy", "matplotlib.pyplot"}, Reads: []string{"matplotlibrc", ".config/matplotlib"}}, nil},
		{"node alone is valid", Warm{Language: runner.Node}, nil},
		{"a shell cannot be started ahead", Warm{Language: runner.Shell}, []string{`"sh" cannot be started ahead`}},
		{"preloads are for python only", Warm{Language: runner.Node, Preload: []string{"fs"}}, []string{"for Python only"}},
		{"a module name is a dotted identifier", Warm{Language: runner.Python, Preload: []string{"os; import evil", "a..b"}}, []string{`"os; import evil" is not a module`, `"a..b" is not a module`}},
		{"a read path stays below the workspace", Warm{Language: runner.Python, Reads: []string{"../etc/passwd", "/etc/passwd", "a/./b", ".."}},
			[]string{`"../etc/passwd"`, `"/etc/passwd"`, `"a/./b"`, `".."`}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := tc.w.Check()
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("Check = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatal("Check = nil, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Check = %v, want it to name %s", err, w)
				}
			}
		})
	}
}

// TestWarmCommandPassesItsOptionsAfterTheWait: PID 1 (init) takes the
// wait after the life; the launcher takes --warm and its operands, then
// the program's env -i; a cold sandbox's command has no --warm at all.
func TestWarmCommandPassesItsOptionsAfterTheWait(t *testing.T) {
	t.Parallel()
	env := []string{"PATH=/bin", "HOME=/workspace"}
	cold := Command(time.Minute, 5*time.Second, env)
	if slices.Contains(cold, "--warm") {
		t.Errorf("Command has --warm: %q", cold)
	}
	cases := []struct {
		name string
		w    Warm
		opts []string // after the wait, up to /usr/bin/env -i
	}{
		{"a ready mark only", Warm{}, []string{"--warm", "-"}},
		{"python started ahead", Warm{Language: runner.Python, Preload: []string{"numpy"}}, []string{"--warm", "python", "sitecustomize.py", "PYTHONPATH=" + warmDir + ":" + ToolsDir + "/python"}},
		{"node started ahead", Warm{Language: runner.Node}, []string{"--warm", "node", "hook.js", "NODE_OPTIONS=--require=" + warmDir + "/hook.js"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			argv, err := WarmCommand(time.Minute, 5*time.Second, env, tc.w)
			if err != nil {
				t.Fatal(err)
			}
			if j := slices.Index(argv, initProgram); j < 0 || !slices.Equal(argv[j+1:j+5], []string{"--", strconv.Itoa(prctl[goruntime.GOARCH]), "60", "5"}) {
				t.Fatalf("argv %.200q: no init with its life of 60s and its wait of 5s", argv)
			}
			i := slices.Index(argv, "gatekeeper-launcher")
			if i < 0 {
				t.Fatalf("argv %.200q: no launcher", argv)
			}
			rest := argv[i+1:]
			if !slices.Equal(rest[:len(tc.opts)], tc.opts) {
				t.Errorf("options %q, want %q", rest[:len(tc.opts)], tc.opts)
			}
			tail := rest[len(tc.opts):]
			if tc.w.Language != "" {
				if !strings.Contains(tail[0], "_gatekeeper_warm") && !strings.Contains(tail[0], "gatekeeper-ready") {
					t.Errorf("the hook source is not next: %.60q", tail[0])
				}
				tail = tail[1:]
			}
			if !slices.Equal(tail, append([]string{"/usr/bin/env", "-i"}, env...)) {
				t.Errorf("after the options %q, want env -i and the environment", tail)
			}
		})
	}
	if _, err := WarmCommand(time.Minute, time.Second, env, Warm{Language: runner.Shell}); err == nil {
		t.Error("WarmCommand accepted a shell started ahead")
	}
}
