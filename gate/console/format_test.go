package console_test

import (
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
)

func TestFormatMakesModelTextSafeForATerminal(t *testing.T) {
	t.Parallel()
	rec := audit.Record{
		Seq: 7, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: audit.KindDecision, Decision: "deny",
		Tool: "evil\x1b]0;pwned\x07", Rule: "tools.not_allowed", Reason: "clear \x1b[2J screen\rover\u202eokay",
	}
	var b strings.Builder
	if err := console.Format(&b, &rec, console.Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	if strings.ContainsAny(strings.TrimSuffix(out, "\n"), "\x1b\x07\r\n\u202e") {
		t.Fatalf("control characters reached the terminal: %q", out)
	}
	for _, want := range []string{`evil\x1b]0;pwned\x07`, `clear \x1b[2J screen\x0dover\u202eokay`, "✘ DENY"} {
		if !strings.Contains(out, want) {
			t.Errorf("output %q lacks %q", out, want)
		}
	}
}

func TestFormatColoursOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	rec := audit.Record{Seq: 1, Kind: audit.KindDecision, Decision: "allow", Tool: "Read"}
	for _, tc := range []struct {
		color bool
		want  bool
	}{{false, false}, {true, true}} {
		var b strings.Builder
		_ = console.Format(&b, &rec, console.Style{Color: tc.color})
		if got := strings.Contains(b.String(), "\x1b["); got != tc.want {
			t.Errorf("Color %v: escape codes present %v in %q", tc.color, got, b.String())
		}
		if !strings.Contains(b.String(), "✔ ALLOW") {
			t.Errorf("Color %v: %q lacks the icon and word", tc.color, b.String())
		}
	}
}

func TestVerdictNamesEveryOutcome(t *testing.T) {
	t.Parallel()
	one, zero := 1, 0
	cases := []struct {
		rec  audit.Record
		want console.Verdict
	}{
		{audit.Record{Kind: audit.KindDecision, Decision: "deny"}, console.Verdict{Icon: "✘", Word: "DENY", Tone: "deny"}},
		{audit.Record{Kind: audit.KindDecision, Decision: "ask"}, console.Verdict{Icon: "?", Word: "ASK", Tone: "ask"}},
		{audit.Record{Kind: audit.KindRun, Decision: "allow", Outcome: audit.OutcomeExited, ExitCode: &zero}, console.Verdict{Icon: "✔", Word: "EXITED", Tone: "allow"}},
		{audit.Record{Kind: audit.KindRun, Decision: "allow", Outcome: audit.OutcomeExited, ExitCode: &one}, console.Verdict{Icon: "▲", Word: "EXIT 1", Tone: "warn"}},
		{audit.Record{Kind: audit.KindRun, Decision: "allow", Outcome: audit.OutcomeTimedOut}, console.Verdict{Icon: "⏱", Word: "TIMEOUT", Tone: "warn"}},
		{audit.Record{Kind: audit.KindRun, Decision: "allow", Outcome: audit.OutcomeOOMKilled}, console.Verdict{Icon: "▲", Word: "OOM", Tone: "warn"}},
		{audit.Record{Kind: audit.KindRun, Decision: "allow", Outcome: audit.OutcomeCancelled}, console.Verdict{Icon: "■", Word: "CANCEL", Tone: "warn"}},
		{audit.Record{Kind: audit.KindRun, Outcome: audit.OutcomeError}, console.Verdict{Icon: "✘", Word: "ERROR", Tone: "deny"}},
		{audit.Record{Kind: audit.KindRun, Decision: "deny", Rule: "run.no_prior_allow"}, console.Verdict{Icon: "✘", Word: "DENY", Tone: "deny"}},
		{audit.Record{Kind: audit.KindCodeCall, Decision: "allow"}, console.Verdict{Icon: "✔", Word: "ALLOW", Tone: "allow"}},
		{audit.Record{Kind: audit.KindCodeCall, Decision: "allow", ErrorKind: "timeout"}, console.Verdict{Icon: "▲", Word: "TIMEOUT", Tone: "warn"}},
		{audit.Record{Kind: audit.KindCodeCall, ErrorKind: "server"}, console.Verdict{Icon: "▲", Word: "SERVER", Tone: "warn"}},
		{audit.Record{Kind: audit.KindCodeCall, Decision: "deny", ErrorKind: "denied"}, console.Verdict{Icon: "✘", Word: "DENY", Tone: "deny"}},
		{audit.Record{Kind: audit.KindSession, Event: audit.SessionStart}, console.Verdict{Icon: "▶", Word: "START", Tone: "info"}},
		{audit.Record{Kind: audit.KindSession, Event: audit.SessionEnd, Reason: "closed"}, console.Verdict{Icon: "■", Word: "END", Tone: "info"}},
		{audit.Record{Kind: audit.KindSession, Event: audit.SessionEnd, Reason: "expired"}, console.Verdict{Icon: "▲", Word: "LOST", Tone: "warn"}},
	}
	for _, tc := range cases {
		if got := console.VerdictOf(&tc.rec); got != tc.want {
			t.Errorf("%+v: %+v, want %+v", tc.rec, got, tc.want)
		}
	}
}

func TestFormatShowsARotation(t *testing.T) {
	t.Parallel()
	rec := audit.Record{
		Seq: 41, Time: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), Kind: audit.KindRotate, PrevFile: "audit.jsonl.000000000031",
		Reason: "the file would pass 2048 bytes", Pruned: []string{"audit.jsonl.000000000001"},
	}
	var b strings.Builder
	if err := console.Format(&b, &rec, console.Style{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	head, tail := "03:04:05.000 #41    · ROTATE  rotate ", "  continues audit.jsonl.000000000031 · the file would pass 2048 bytes · removed by retention: audit.jsonl.000000000001\n"
	if !strings.HasPrefix(out, head) || !strings.HasSuffix(out, tail) || strings.TrimSpace(out[len(head):len(out)-len(tail)]) != "" {
		t.Fatalf("got %q\nwant %q, spaces, %q", out, head, tail)
	}
}

func TestFormatIndentsANestedCallUnderItsRun(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rec  audit.Record
		want []string
	}{
		{"an allowed call shows its sizes", audit.Record{Seq: 7, Time: at, Kind: audit.KindCodeCall, Decision: "allow", Rule: "code_calls.callable", Reason: "callable",
			QueryID: "q_1", RunID: "r_9", CallSeq: 3, Server: "crm", Tool: "get_customer", ArgumentsBytes: 22, ResultSHA256: "ab", ResultBytes: 2048, DurationMS: 4},
			[]string{"03:04:05.000 #7       ↳ ✔ ALLOW   code_call crm.get_customer", "code_calls.callable", "run r_9 call 3 · args 22 B · result 2.0 KiB · 4 ms\n"}},
		{"a denied call shows its reason", audit.Record{Seq: 8, Time: at, Kind: audit.KindCodeCall, Decision: "deny", Rule: "ops.no_vip", Reason: "no \x1b[2Jvip",
			RunID: "r_9", CallSeq: 4, Server: "crm", Tool: "get_customer", ErrorKind: "denied"},
			[]string{"  ↳ ✘ DENY ", "ops.no_vip", "run r_9 call 4 · args 0 B · 0 ms · no \\x1b[2Jvip\n"}},
		{"a failed call shows its error", audit.Record{Seq: 9, Time: at, Kind: audit.KindCodeCall, Decision: "allow", Rule: "code_calls.callable",
			RunID: "r_9", CallSeq: 5, Server: "crm", Tool: "get_customer", ErrorKind: "server", Error: "connection reset"},
			[]string{"  ↳ ▲ SERVER ", "server: connection reset\n"}},
		{"an asked call shows who answered, how and after how long", audit.Record{Seq: 10, Time: at, Kind: audit.KindCodeCall, Decision: "deny", Rule: "tools.ask_list",
			Reason: "needs approval; the user denied this call from code: no", RunID: "r_9", CallSeq: 6, Server: "crm", Tool: "delete", ErrorKind: "denied",
			Approval: &audit.Approval{By: "client", Decision: "deny", Message: "no", WaitMS: 1200}},
			[]string{"  ↳ ✘ DENY ", "run r_9 call 6 · args 0 B · 0 ms · asked: client deny after 1200 ms · needs approval; the user denied this call from code: no\n"}},
	} {
		formatContains(t, tc.name, tc.rec, tc.want)
	}
}

func TestFormatShowsSessionsAndTheirRuns(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	zero := 0
	for _, tc := range []struct {
		name string
		rec  audit.Record
		want []string
	}{
		{"a start names the session, its sandbox, start and revision", audit.Record{Seq: 3, Time: at, Kind: audit.KindSession, Event: audit.SessionStart, QueryID: "q_1",
			SessionID: "s_5f1c2e", Sandbox: "gk-7a1", Started: at, Revision: "sha256:4f1c9e0b"},
			[]string{"▶ START   session  session_start", "session s_5f1c2e · sandbox gk-7a1 · started 03:04:05 · policy sha256:4f1\n"}},
		{"an end says why and after how many runs", audit.Record{Seq: 9, Time: at, Kind: audit.KindSession, Event: audit.SessionEnd, QueryID: "q_1",
			SessionID: "s_5f1c2e", Reason: "oom_killed", Runs: 4, Sandbox: "gk-\x1b7a1"},
			[]string{"▲ LOST    session  session_end", `session s_5f1c2e · ended: oom_killed · 4 runs · sandbox gk-\x1b7a1` + "\n"}},
		{"a run in a session shows its number and a loss of state", audit.Record{Seq: 5, Time: at, Kind: audit.KindRun, Decision: "allow", Outcome: audit.OutcomeExited, ExitCode: &zero,
			SessionID: "s_5f1c2e", SessionRun: 1, StateLost: &audit.StateLost{Reason: "expired", Lost: "variables", Fresh: true}},
			[]string{"session s_5f1c2e run 1 · state lost (expired, fresh session)"}},
	} {
		formatContains(t, tc.name, tc.rec, tc.want)
	}
}

func TestFormatIndentsAnInterceptedRequestUnderItsRun(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tc := range []struct {
		name string
		rec  audit.Record
		want []string
	}{
		{"an allowed request shows its status and the secrets by name", audit.Record{Seq: 7, Time: at, Kind: audit.KindEgress, Decision: "allow", Rule: "http.allowed", Reason: "allowed",
			QueryID: "q_1", RunID: "r_9", Method: "GET", Host: "api.github.com", Port: 443, Path: "/repos/o/r", Intercepted: true, Status: 200, Proto: "HTTP/2.0",
			Secrets: []string{"github"}, BytesUp: 300, BytesDown: 4096, DurationMS: 12},
			[]string{"03:04:05.000 #7       ↳ ✔ ALLOW   egress    GET api.github.com/repos/o/r", "http.allowed", "run r_9 · → 200 · HTTP/2.0 · secrets github · ↑300 B ↓4.0 KiB · 12 ms\n"}},
		{"a refused request shows its rule and reason, the port when not 443", audit.Record{Seq: 8, Time: at, Kind: audit.KindEgress, Decision: "deny", Rule: "http.read_only",
			Reason: "only GET \x1b[2J", RunID: "r_9", Method: "DELETE", Host: "api.example", Port: 8443, Path: "/x", Intercepted: true, Status: 403, Proto: "HTTP/1.1"},
			[]string{"  ↳ ✘ DENY    egress    DELETE api.example:8443/x", "http.read_only", "run r_9 · → 403 · HTTP/1.1 · ↑0 B ↓0 B · 0 ms · only GET \\x1b[2J\n"}},
		{"the line past the bound counts the rest", audit.Record{Seq: 9, Time: at, Kind: audit.KindEgress, Decision: "deny", Rule: "egress.request_lines", RunID: "r_9",
			Host: "api.github.com", Port: 443, OmittedRequests: 44},
			[]string{"  ↳ ✘ DENY    egress    api.github.com ", "egress.request_lines", "run r_9 · 44 more requests without a line of their own\n"}},
		{"a tunnel stays a line of its own", audit.Record{Seq: 10, Time: at, Kind: audit.KindEgress, Decision: "allow", Rule: "egress.allowlisted", RunID: "r_9",
			Method: "CONNECT", Host: "pypi.org", Port: 443, BytesUp: 10, BytesDown: 20},
			[]string{"#10    ✔ ALLOW   egress ", "pypi.org:443 ↑10 B ↓20 B"}},
	} {
		line := formatContains(t, tc.name, tc.rec, tc.want)
		if tc.rec.Method == "CONNECT" && strings.Contains(line, "↳") {
			t.Errorf("%s: a tunnel is indented: %q", tc.name, line)
		}
	}
}

// formatContains formats rec plainly and checks that the line holds each
// of want; it returns the line.
func formatContains(t *testing.T, name string, rec audit.Record, want []string) string {
	t.Helper()
	var b strings.Builder
	if err := console.Format(&b, &rec, console.Style{}); err != nil {
		t.Fatal(err)
	}
	for _, w := range want {
		if !strings.Contains(b.String(), w) {
			t.Errorf("%s: %q lacks %q", name, b.String(), w)
		}
	}
	return b.String()
}
