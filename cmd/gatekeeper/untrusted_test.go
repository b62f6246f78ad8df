package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// hostileNames are file names a program can give its files to take over
// the operator's terminal or pose as lines of the summary.
var hostileNames = []string{
	"\x1b]0;retitled\x07a.txt",          // OSC: set the window title, ended by BEL
	"\x1b]8;;https://x.example\x1b\\ln", // OSC 8 hyperlink, ended by ST
	"\x1b[2J\x1b[Hclear.txt",            // CSI: clear the screen, cursor home
	"\u009b2Jc1.txt",                    // C1 CSI
	"x.txt\n-- exit 0 (exited) in 1ms",  // a forged summary line
	"cr.txt\r-- file ok.txt",            // CR writes over the line
	"nel.txt\u0085ls\u2028ps\u2029.txt", // NEL, line and paragraph separators
	"bidi\u202etxt.exe",                 // right-to-left override
	"del\x7f.txt",
}

func TestRunSummaryQuotesFileNames(t *testing.T) {
	t.Parallel()
	res := runner.Result{Reason: runner.Exited, Duration: time.Second, Image: "img", Runtime: "runc"}
	for _, n := range hostileNames {
		res.Files = append(res.Files, runner.File{Path: n, Size: 1, Change: "created", MediaType: "text/plain; charset=utf-8"})
	}
	var b bytes.Buffer
	writeRunSummary(&b, res)
	out := b.String()
	if strings.ContainsFunc(strings.ReplaceAll(out, "\n", ""), untrusted.Unsafe) {
		t.Fatalf("an unsafe character reaches the terminal: %q", out)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != 1+len(hostileNames) {
		t.Fatalf("%d lines for %d files: %q", len(lines), len(hostileNames), out)
	}
	for i, n := range hostileNames {
		if want := "-- file " + untrusted.Quote(n) + " (created, 1 bytes, text/plain; charset=utf-8)"; lines[1+i] != want {
			t.Errorf("line %d = %q, want %q", 1+i, lines[1+i], want)
		}
	}
}

// TestJSONOutputEscapesWhatJSONLeavesRaw checks the JSON of run, runs
// show and decide: DEL, C1 and bidirectional controls in the model's text,
// which encoding/json writes raw, come out escaped.
func TestJSONOutputEscapesWhatJSONLeavesRaw(t *testing.T) {
	t.Parallel()
	var b bytes.Buffer
	if err := writeJSON(&b, map[string][]string{"names": hostileNames}); err != nil {
		t.Fatal(err)
	}
	body := strings.NewReplacer("\n", "").Replace(b.String())
	if strings.ContainsFunc(body, untrusted.Unsafe) {
		t.Fatalf("an unsafe character reaches the terminal: %q", b.String())
	}
	if !strings.Contains(body, `\u009b2Jc1.txt`) || !strings.Contains(body, `bidi\u202etxt.exe`) {
		t.Errorf("not escaped as JSON: %s", body)
	}
}
