package console

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// Style says how Format writes a record.
type Style struct {
	// Color uses ANSI colours (for a terminal).
	Color bool
	// Location is the time zone of the time column; nil means UTC.
	Location *time.Location
}

const (
	ansiReset  = "\x1b[0m"
	ansiDim    = "\x1b[2m"
	ansiRed    = "\x1b[31m"
	ansiGreen  = "\x1b[32m"
	ansiYellow = "\x1b[33m"
)

// Verdict is how a record's result is shown, in the terminal and the
// browser alike: an icon and a word, so that colour is never the only
// sign, and a tone the colour comes from (allow, deny, ask, warn, info).
type Verdict struct {
	Icon string `json:"icon"`
	Word string `json:"word"`
	Tone string `json:"tone"`
}

// VerdictOf returns the Verdict of rec: for a run that was allowed, how it
// ended; otherwise its decision.
func VerdictOf(r *audit.Record) Verdict {
	if r.Kind == audit.KindRun && r.Decision != "deny" && r.Outcome != "" {
		switch r.Outcome {
		case audit.OutcomeExited:
			if r.ExitCode != nil && *r.ExitCode != 0 {
				return Verdict{"▲", fmt.Sprintf("EXIT %d", *r.ExitCode), "warn"}
			}
			return Verdict{"✔", "EXITED", "allow"}
		case audit.OutcomeTimedOut:
			return Verdict{"⏱", "TIMEOUT", "warn"}
		case audit.OutcomeOOMKilled:
			return Verdict{"▲", "OOM", "warn"}
		case audit.OutcomeCancelled:
			return Verdict{"■", "CANCEL", "warn"}
		case audit.OutcomeError:
			return Verdict{"✘", "ERROR", "deny"}
		}
	}
	if r.Kind == audit.KindSession {
		switch {
		case r.Event == audit.SessionStart:
			return Verdict{"▶", "START", "info"}
		case r.Reason == "closed":
			return Verdict{"■", "END", "info"}
		}
		// Any other end loses the session's state: the next run starts
		// afresh and reports state_lost.
		return Verdict{"▲", "LOST", "warn"}
	}
	if r.Kind == audit.KindCodeCall && r.ErrorKind != "" && r.Decision != "deny" {
		// Allowed (or never decided) but no result: the server failed,
		// the call timed out or the run ended.
		return Verdict{"▲", strings.ToUpper(r.ErrorKind), "warn"}
	}
	switch r.Decision {
	case "allow":
		return Verdict{"✔", "ALLOW", "allow"}
	case "deny":
		return Verdict{"✘", "DENY", "deny"}
	case "ask":
		return Verdict{"?", "ASK", "ask"}
	}
	return Verdict{"·", strings.ToUpper(string(r.Kind)), "info"}
}

// toneColor is the terminal colour of each tone.
var toneColor = map[string]string{"allow": ansiGreen, "deny": ansiRed, "ask": ansiYellow, "warn": ansiYellow}

// Format writes rec as one line for a terminal: time, seq, verdict, kind,
// event, tool, rule, query, then the reason (decisions) or the outcome,
// exit code, duration, peak memory, runtime and image (runs), or the file
// a rotate line continues, why, and what retention removed. Everything
// the model or a policy wrote is made safe for a terminal: control
// characters (escape sequences included) are written as \x.. escapes.
func Format(w io.Writer, rec *audit.Record, st Style) error {
	loc := st.Location
	if loc == nil {
		loc = time.UTC
	}
	paint := func(color, s string) string {
		if !st.Color || color == "" {
			return s
		}
		return color + s + ansiReset
	}
	v := VerdictOf(rec)
	var b strings.Builder
	b.WriteString(paint(ansiDim, rec.Time.In(loc).Format("15:04:05.000")))
	fmt.Fprintf(&b, " %s ", paint(ansiDim, fmt.Sprintf("#%-5d", rec.Seq)))
	if rec.Kind == audit.KindCodeCall {
		// A nested call stands under the run that made it (its decision
		// line comes before, its run line after): indented, named by run.
		b.WriteString(paint(ansiDim, "  ↳ "))
		b.WriteString(paint(toneColor[v.Tone], fmt.Sprintf("%s %-7s", v.Icon, v.Word)))
		fmt.Fprintf(&b, " %-9s %-31s %-28s %s  %s", rec.Kind, safe(rec.Server+"."+rec.Tool), safe(rec.Rule), paint(ansiDim, shortID(rec.QueryID)), codeCallText(rec))
		_, err := io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
		return err
	}
	if rec.Kind == audit.KindEgress && (rec.Intercepted || rec.OmittedRequests > 0) {
		// An intercepted request stands under its run, as a nested call
		// does: METHOD host/path, its rule, then → status and the rest.
		b.WriteString(paint(ansiDim, "  ↳ "))
		b.WriteString(paint(toneColor[v.Tone], fmt.Sprintf("%s %-7s", v.Icon, v.Word)))
		fmt.Fprintf(&b, " %-9s %-31s %-28s %s  %s", rec.Kind, safe(RequestTarget(rec)), safe(rec.Rule), paint(ansiDim, shortID(rec.QueryID)), requestText(rec))
		_, err := io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
		return err
	}
	b.WriteString(paint(toneColor[v.Tone], fmt.Sprintf("%s %-7s", v.Icon, v.Word)))
	fmt.Fprintf(&b, " %-8s %-10s %-26s %-28s %s", rec.Kind, safe(rec.Event), safe(rec.Tool), safe(rec.Rule), paint(ansiDim, shortID(rec.QueryID)))
	switch rec.Kind {
	case audit.KindRun:
		var parts []string
		if rec.Outcome != "" {
			parts = append(parts, string(rec.Outcome))
		}
		if rec.ExitCode != nil {
			parts = append(parts, fmt.Sprintf("exit %d", *rec.ExitCode))
		}
		if rec.Outcome != "" && rec.Outcome != audit.OutcomeError {
			peak := "peak unknown" // the runner saw no memory figure
			if rec.PeakMemoryBytes > 0 {
				peak = "peak " + bytesText(rec.PeakMemoryBytes)
			}
			parts = append(parts, fmt.Sprintf("%d ms", rec.DurationMS), peak)
		}
		if rec.Runtime != "" {
			parts = append(parts, safe(rec.Runtime))
		}
		if rec.Image != "" {
			parts = append(parts, safe(rec.Image))
		}
		if rec.Truncated {
			parts = append(parts, "output truncated")
		}
		if rec.ToolCalls > 0 {
			parts = append(parts, fmt.Sprintf("%d nested calls", rec.ToolCalls))
		}
		if rec.SessionRun > 0 {
			parts = append(parts, fmt.Sprintf("session %s run %d", safe(shortID(rec.SessionID)), rec.SessionRun))
		}
		if l := rec.StateLost; l != nil {
			when := "lost in this run"
			if l.Fresh {
				when = "fresh session"
			}
			parts = append(parts, fmt.Sprintf("state lost (%s, %s)", safe(l.Reason), when))
		}
		if rec.Error != "" {
			parts = append(parts, safe(rec.Error))
		}
		if rec.Reason != "" {
			parts = append(parts, safe(rec.Reason))
		}
		b.WriteString("  " + strings.Join(parts, " · "))
	case audit.KindEgress:
		fmt.Fprintf(&b, "  %s:%d ↑%s ↓%s %s", safe(rec.Host), rec.Port, bytesText(rec.BytesUp), bytesText(rec.BytesDown), safe(rec.Reason+rec.Error))
	case audit.KindRotate:
		parts := []string{"continues " + safe(rec.PrevFile)}
		if rec.Reason != "" {
			parts = append(parts, safe(rec.Reason))
		}
		if len(rec.Pruned) > 0 {
			parts = append(parts, "removed by retention: "+safe(strings.Join(rec.Pruned, ", ")))
		}
		b.WriteString("  " + strings.Join(parts, " · "))
	case audit.KindSession:
		b.WriteString("  " + sessionText(rec, loc))
	case audit.KindQuery:
		in := "no override"
		if rec.ToolInput != nil {
			raw, _ := json.Marshal(rec.ToolInput)
			in = "override " + string(raw)
		}
		fmt.Fprintf(&b, "  %s %s", safe(in), safe(rec.Reason))
	default:
		b.WriteString("  " + safe(rec.Reason))
	}
	_, err := io.WriteString(w, strings.TrimRight(b.String(), " ")+"\n")
	return err
}

// sessionText is the details of a session line: the session, its
// sandbox, when it started and under which policy revision, and for an
// end why and after how many runs.
func sessionText(rec *audit.Record, loc *time.Location) string {
	parts := []string{"session " + safe(rec.SessionID)}
	if rec.Event == audit.SessionEnd {
		parts = append(parts, "ended: "+safe(rec.Reason), fmt.Sprintf("%d runs", rec.Runs))
	}
	if rec.Sandbox != "" {
		parts = append(parts, "sandbox "+safe(rec.Sandbox))
	}
	if !rec.Started.IsZero() {
		parts = append(parts, "started "+rec.Started.In(loc).Format("15:04:05"))
	}
	if rec.Revision != "" {
		parts = append(parts, "policy "+safe(shortID(rec.Revision)))
	}
	return strings.Join(parts, " · ")
}

// codeCallText is the details of a code_call line: the run and the
// call's number in it, the sizes, the duration, and the error or reason.
func codeCallText(rec *audit.Record) string {
	parts := []string{fmt.Sprintf("run %s call %d", safe(rec.RunID), rec.CallSeq), "args " + bytesText(rec.ArgumentsBytes)}
	if rec.ResultSHA256 != "" {
		res := "result " + bytesText(rec.ResultBytes)
		if rec.ResultIsError {
			res += " (isError)"
		}
		parts = append(parts, res)
	}
	parts = append(parts, fmt.Sprintf("%d ms", rec.DurationMS))
	if a := rec.Approval; a != nil {
		// The policy asked: who answered, how, and how long the call waited.
		parts = append(parts, safe(fmt.Sprintf("asked: %s %s after %d ms", a.By, a.Decision, a.WaitMS)))
	}
	if rec.ErrorKind != "" && rec.Error != "" {
		parts = append(parts, safe(rec.ErrorKind+": "+rec.Error))
	}
	if rec.Reason != "" && rec.Decision != "allow" {
		parts = append(parts, safe(rec.Reason))
	}
	return strings.Join(parts, " · ")
}

// RequestTarget is an intercepted request's "METHOD host/path" (the
// port when it is not 443), or the host alone on the line that counts a
// run's omitted requests.
func RequestTarget(rec *audit.Record) string {
	host := rec.Host
	if rec.Port != 0 && rec.Port != 443 {
		host += fmt.Sprintf(":%d", rec.Port)
	}
	if rec.Method == "" {
		return host
	}
	return rec.Method + " " + host + rec.Path
}

// requestText is the details of an intercepted request's line: the run,
// the status, the secrets injected by name, the bytes each way, the
// duration, and the error or reason; or how many requests got no line.
func requestText(rec *audit.Record) string {
	parts := []string{"run " + safe(rec.RunID)}
	if rec.OmittedRequests > 0 {
		return strings.Join(append(parts, fmt.Sprintf("%d more requests without a line of their own", rec.OmittedRequests)), " · ")
	}
	status := "→ no response"
	if rec.Status > 0 {
		status = fmt.Sprintf("→ %d", rec.Status)
	}
	parts = append(parts, status)
	if rec.Proto != "" {
		parts = append(parts, safe(rec.Proto))
	}
	if len(rec.Secrets) > 0 {
		parts = append(parts, "secrets "+safe(strings.Join(rec.Secrets, ", ")))
	}
	parts = append(parts, fmt.Sprintf("↑%s ↓%s", bytesText(rec.BytesUp), bytesText(rec.BytesDown)), fmt.Sprintf("%d ms", rec.DurationMS))
	if rec.Error != "" {
		parts = append(parts, safe(rec.Error))
	}
	if rec.Reason != "" && rec.Decision != "allow" {
		parts = append(parts, safe(rec.Reason))
	}
	return strings.Join(parts, " · ")
}

// safe makes s harmless on a terminal (untrusted.Terminal): control
// characters, which could move the cursor or rewrite the screen, become
// \x.. or \u.... escapes.
func safe(s string) string { return untrusted.Terminal(s) }

// shortID shortens q_3fa8c1d2-… to its first 10 characters.
func shortID(id string) string {
	if len(id) > 10 {
		return id[:10]
	}
	return id
}

func bytesText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}
