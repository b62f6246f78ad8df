package soak

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// TestAwaitPreconditionWaitsForItOrFailsClearly feeds the fault's wait
// conditions that hold at once, later, never, or fail: it must return as
// soon as one holds, and otherwise say why the fault's precondition never
// held.
func TestAwaitPreconditionWaitsForItOrFailsClearly(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		holdsAt int    // the call at which it holds; 0 never
		failAt  int    // the call at which it fails; 0 never
		calls   int    // how many calls are wanted; 0 more than one
		err     string // a part of the error, "" for none
	}{
		{"a precondition that holds at once is not waited for", 1, 0, 1, ""},
		{"a precondition that holds later is waited for", 4, 0, 4, ""},
		{"a precondition that never holds fails naming the bound", 0, 0, 0, "did not hold within 20ms"},
		{"a condition that fails ends the wait with its error", 0, 2, 2, "the networked probe ended"},
	}
	for _, tc := range tests {
		n := 0
		_, detail, err := awaitPrecondition(t.Context(), 20*time.Millisecond, time.Millisecond, func() (bool, string, error) {
			n++
			if n == tc.failAt {
				return false, "", errors.New("the networked probe ended before the kill")
			}
			return n == tc.holdsAt, "call " + string(rune('0'+n%10)), nil
		})
		switch {
		case tc.err == "" && err != nil:
			t.Errorf("%s: %v", tc.name, err)
		case tc.err != "" && (err == nil || !strings.Contains(err.Error(), tc.err)):
			t.Errorf("%s: error %v, want one with %q", tc.name, err, tc.err)
		case tc.calls > 0 && n != tc.calls:
			t.Errorf("%s: %d calls, want %d", tc.name, n, tc.calls)
		case tc.calls == 0 && n < 2:
			t.Errorf("%s: %d calls, want it polled until the bound", tc.name, n)
		case tc.err == "" && detail != "call "+string(rune('0'+tc.holdsAt)):
			t.Errorf("%s: detail %q, want the last call's", tc.name, detail)
		}
	}
}
