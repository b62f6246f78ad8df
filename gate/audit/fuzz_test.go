package audit_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// FuzzVerify checks that Verify never panics and that its report agrees
// with its input: a log that verifies has exactly one newline per good
// line and ends in one, and a break is reported just after the good lines.
func FuzzVerify(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		rep, err := audit.Verify(bytes.NewReader(data))
		var be *audit.BreakError
		switch {
		case err == nil:
			if n := bytes.Count(data, []byte{'\n'}); rep.Lines != n {
				t.Errorf("Verify passed with %d lines, input has %d newlines", rep.Lines, n)
			}
			if len(data) > 0 && data[len(data)-1] != '\n' {
				t.Errorf("Verify passed an input that does not end in a newline")
			}
			if rep.LastSeq != int64(rep.Lines) {
				t.Errorf("Verify passed with last seq %d after %d lines", rep.LastSeq, rep.Lines)
			}
		case errors.As(err, &be):
			if be.Line != rep.Lines+1 {
				t.Errorf("break at line %d after %d good lines", be.Line, rep.Lines)
			}
			if be.Reason == "" {
				t.Errorf("break at line %d without a reason", be.Line)
			}
		default:
			t.Errorf("Verify error = %v, want a *BreakError", err)
		}
	})
}
