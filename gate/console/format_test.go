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
