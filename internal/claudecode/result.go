package claudecode

import (
	"strconv"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
)

// FormatRunResult is the text the model reads for a finished run, exactly
// as @gatekeeper/client's formatRunResult writes it (a test pins the two
// with the files in testdata/run-results).
func FormatRunResult(r *wire.RunResult) string {
	lines := []string{"exit code " + strconv.Itoa(r.ExitCode) + " (" + r.Reason + ") after " + strconv.FormatInt(r.DurationMS, 10) + " ms"}
	var flags []string
	if r.Truncated {
		flags = append(flags, "output truncated")
	}
	if r.TimedOut {
		flags = append(flags, "timed out")
	}
	if r.OOMKilled {
		flags = append(flags, "killed: out of memory")
	}
	if len(flags) > 0 {
		lines = append(lines, "note: "+strings.Join(flags, ", "))
	}
	lines = append(lines, "truncated="+strconv.FormatBool(r.Truncated)+" timed_out="+strconv.FormatBool(r.TimedOut)+" oom_killed="+strconv.FormatBool(r.OOMKilled))
	lines = append(lines, stream("stdout", r.Stdout), stream("stderr", r.Stderr))
	return strings.Join(lines, "\n")
}

func stream(name, text string) string {
	if text == "" {
		return name + ": (empty)"
	}
	return name + ":\n" + text
}

// runOutcome is the run tool's structuredContent: the same object as
// @gatekeeper/client's, its keys in the same order (the CLI passes it to
// the model as JSON).
type runOutcome struct {
	ExitCode   int    `json:"exit_code"`
	Reason     string `json:"reason"`
	Stdout     string `json:"stdout"`
	Stderr     string `json:"stderr"`
	Truncated  bool   `json:"truncated"`
	TimedOut   bool   `json:"timed_out"`
	OOMKilled  bool   `json:"oom_killed"`
	DurationMS int64  `json:"duration_ms"`
}

func structured(r *wire.RunResult) runOutcome {
	return runOutcome{ExitCode: r.ExitCode, Reason: r.Reason, Stdout: r.Stdout, Stderr: r.Stderr,
		Truncated: r.Truncated, TimedOut: r.TimedOut, OOMKilled: r.OOMKilled, DurationMS: r.DurationMS}
}
