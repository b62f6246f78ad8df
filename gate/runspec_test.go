package gate_test

import (
	"errors"
	"maps"
	"slices"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

const runSpecPolicy = `version: 1
workspace_root: ./ws
tools:
  allow: [mcp__sandboxed_code__run]
sandbox:
  proc: {timeout: 3s, memory: 128m}
  output: {max_files: 2, max_files_bytes: 8}
ceilings:
  timeout: 5s
`

func ms(n int64) *int64 { return &n }

// TestRunSpec: a request within the effective policy becomes the Spec the
// runner gets; one past a limit is a *RunRequestError naming the field
// whose limit it passes, in the words of the sidecar's invalid_field.
func TestRunSpec(t *testing.T) {
	t.Parallel()
	eng := newEnv(t, runSpecPolicy).engine(t)
	q, err := eng.OpenQuery(t.Context(), "q", []byte(`{"proc":{"timeout":"4s"}}`))
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	sb, err := eff.RunnerSandbox()
	must(t, err)
	tests := []struct {
		name    string
		req     gate.RunRequest
		timeout time.Duration // of the Spec; 0 when refused
		field   string        // the RunRequestError's field
		message string
	}{
		{name: "no timeout asked runs the query's sandbox.proc.timeout, the override's",
			req: gate.RunRequest{Language: "python"}, timeout: 4 * time.Second},
		{name: "a timeout below the policy's is the run's",
			req: gate.RunRequest{Language: "sh", TimeoutMS: ms(1500)}, timeout: 1500 * time.Millisecond},
		{name: "a timeout at the policy's is allowed",
			req: gate.RunRequest{Language: "node", TimeoutMS: ms(4000)}, timeout: 4 * time.Second},
		{name: "a timeout one millisecond past the policy's is refused",
			req: gate.RunRequest{Language: "python", TimeoutMS: ms(4001)}, field: "sandbox.proc.timeout",
			message: "run: timeout_ms 4001 exceeds the query's sandbox.proc.timeout of 4s"},
		{name: "a timeout of zero is refused",
			req: gate.RunRequest{Language: "python", TimeoutMS: ms(0)}, field: "timeout_ms",
			message: "run: timeout_ms 0 is not a positive number of milliseconds"},
		{name: "files at both limits are allowed",
			req: gate.RunRequest{Language: "python", Files: map[string]string{"a": "1234", "b/c": "5678"}}, timeout: 4 * time.Second},
		{name: "one file more than max_files is refused",
			req: gate.RunRequest{Language: "python", Files: map[string]string{"a": "", "b": "", "c": ""}}, field: "sandbox.output.max_files",
			message: "run: files holds 3 files of 0 bytes; the query's sandbox.output allows 2 files of 8 (max_files, max_files_bytes)"},
		{name: "one byte more than max_files_bytes is refused",
			req: gate.RunRequest{Language: "python", Files: map[string]string{"a": "123456789"}}, field: "sandbox.output.max_files_bytes",
			message: "run: files holds 1 files of 9 bytes; the query's sandbox.output allows 2 files of 8 (max_files, max_files_bytes)"},
		{name: "a language the sandbox lacks is refused",
			req: gate.RunRequest{Language: "ruby"}, field: "language",
			message: `run: language "ruby" is not one of python, sh, node`},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			tc.req.RunID, tc.req.QueryID, tc.req.Code = "r_1", "q_1", "print(1)"
			spec, err := eff.RunSpec(t.Context(), tc.req)
			if tc.message != "" {
				var re *gate.RunRequestError
				if !errors.As(err, &re) || re.Field != tc.field || re.Error() != tc.message {
					t.Fatalf("RunSpec = %v; want a RunRequestError of %s saying %q", err, tc.field, tc.message)
				}
				return
			}
			must(t, err)
			if spec.Timeout != tc.timeout || spec.Language != runner.Language(tc.req.Language) || spec.Code != "print(1)" ||
				spec.RunID != "r_1" || spec.QueryID != "q_1" || !maps.Equal(spec.Files, tc.req.Files) {
				t.Fatalf("RunSpec = %+v; want timeout %s and the request's fields", spec, tc.timeout)
			}
			if spec.Sandbox.MemoryBytes != sb.MemoryBytes || spec.Sandbox.Image != sb.Image || spec.Sandbox.MaxFiles != 2 {
				t.Fatalf("RunSpec's sandbox = %+v; want RunnerSandbox's %+v", spec.Sandbox, sb)
			}
			if spec.Workspace != nil || spec.OnOutput != nil || spec.Labels != nil {
				t.Fatalf("RunSpec = %+v; want no workspace, output callback or labels (a request without a tool_use_id)", spec)
			}
		})
	}
}

// TestRunSpecKeepsOutputsAndLabels: outputs absent (nil) and empty (none)
// mean different things to the runner and reach it as sent; a model's
// run is labelled with its tool_use_id.
func TestRunSpecKeepsOutputsAndLabels(t *testing.T) {
	t.Parallel()
	q, err := newEnv(t, runSpecPolicy).engine(t).OpenQuery(t.Context(), "q", nil)
	must(t, err)
	eff, err := q.Effective(t.Context())
	must(t, err)
	for _, outputs := range [][]string{nil, {}, {".", "out"}} {
		spec, err := eff.RunSpec(t.Context(), gate.RunRequest{Language: "python", ToolUseID: "toolu_1", Outputs: outputs})
		must(t, err)
		if (spec.Outputs == nil) != (outputs == nil) || !slices.Equal(spec.Outputs, outputs) {
			t.Errorf("outputs %#v became %#v", outputs, spec.Outputs)
		}
		if spec.Labels["gatekeeper.tool_use_id"] != "toolu_1" || spec.Timeout != 3*time.Second {
			t.Errorf("RunSpec = %+v; want the tool_use_id label and the base's 3s", spec)
		}
	}
}

// TestRunSpecSession: a request that names a session runs in it exactly
// when the query's effective policy turns sessions on, with the policy's
// durations and the revision the Spec was resolved under.
func TestRunSpecSession(t *testing.T) {
	t.Parallel()
	eng := newEnv(t, runSpecPolicy+"  session: {idle_timeout: 20m, max_lifetime: 1h}\n").engine(t)
	record := func(runner.SessionEvent) {}
	tests := []struct {
		name, override, sessionID string
		want                      *runner.Session // nil: single use
	}{
		{name: "the base policy has no session", sessionID: "s_1"},
		{name: "an override that turns sessions on runs in the named session", override: `{"session":{"idle_timeout":"5m","max_lifetime":"30m"}}`, sessionID: "s_1",
			want: &runner.Session{ID: "s_1", IdleTimeout: 5 * time.Minute, MaxLifetime: 30 * time.Minute}},
		{name: "a request without a session id is single use even with sessions on", override: `{"session":{"idle_timeout":"5m"}}`},
		{name: "an override that turns sessions off again is single use", override: `{"session":{"idle_timeout":"0s"}}`, sessionID: "s_1"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var raw []byte
			if tc.override != "" {
				raw = []byte(tc.override)
			}
			q, err := eng.OpenQuery(t.Context(), "q", raw)
			must(t, err)
			eff, err := q.Effective(t.Context())
			must(t, err)
			spec, err := eff.RunSpec(t.Context(), gate.RunRequest{Language: "python", SessionID: tc.sessionID, SessionEvents: record})
			must(t, err)
			if tc.want == nil {
				if spec.Session != nil {
					t.Fatalf("spec.Session = %+v, want none", spec.Session)
				}
				return
			}
			got := spec.Session
			if got == nil {
				t.Fatal("spec.Session = nil, want a session")
			}
			if got.ID != tc.want.ID || got.IdleTimeout != tc.want.IdleTimeout || got.MaxLifetime != tc.want.MaxLifetime {
				t.Errorf("spec.Session = %+v, want %+v", got, tc.want)
			}
			if got.Revision == "" || got.Revision != eff.Revision {
				t.Errorf("spec.Session.Revision = %q, want the effective policy's revision %q", got.Revision, eff.Revision)
			}
			if got.Events == nil {
				t.Error("spec.Session.Events is nil, want the request's callback")
			}
		})
	}
}
