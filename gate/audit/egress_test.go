package audit_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"path/filepath"
	"reflect"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// TestInterceptedRequestLinesRoundTripInTheChain: an intercepted
// request's line carries its method, path, status, proto and the names
// of the secrets injected, reads back as written, and the chain covers
// each of those fields: an edit of any of them breaks it.
func TestInterceptedRequestLinesRoundTripInTheChain(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.log")
	l, err := audit.Open(path, audit.Options{Now: stepClock()})
	if err != nil {
		t.Fatal(err)
	}
	recs := []audit.Record{
		{Kind: audit.KindEgress, RunID: "r_1", QueryID: "q_1", Method: "DELETE", Host: "api.github.com", Port: 443, Intercepted: true,
			Path: "/repos/our-org/x", Status: 403, Proto: "HTTP/2.0", Decision: "deny", Rule: "http.method", Reason: "read only", Secrets: []string{"github"}},
		{Kind: audit.KindEgress, RunID: "r_1", QueryID: "q_1", Method: "GET", Host: "api.github.com", Port: 443, Intercepted: true,
			Path: "/repos/our-org/x", Status: 200, Proto: "HTTP/1.1", Decision: "allow", Rule: "http.allowed", Secrets: []string{"github"}, BytesUp: 120, BytesDown: 3400},
		{Kind: audit.KindEgress, RunID: "r_1", QueryID: "q_1", Host: "api.github.com", Port: 443, Decision: "deny", Rule: "egress.request_lines", OmittedRequests: 7},
	}
	for _, r := range recs {
		if err := l.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, path)
	for i, line := range lines {
		var got audit.Record
		if err := json.Unmarshal(line, &got); err != nil {
			t.Fatal(err)
		}
		got.Seq, got.Time, got.Prev = 0, recs[i].Time, ""
		if !reflect.DeepEqual(got, recs[i]) {
			t.Errorf("line %d reads back as %+v, want %+v", i+1, got, recs[i])
		}
	}
	if _, err := audit.Verify(bytes.NewReader(join(lines...))); err != nil {
		t.Fatalf("Verify: %v", err)
	}
	for _, edit := range [][2]string{
		{`"method":"DELETE"`, `"method":"GET"`},
		{`"path":"/repos/our-org/x"`, `"path":"/repos/our-org/y"`},
		{`"status":403`, `"status":200`},
		{`"proto":"HTTP/2.0"`, `"proto":"HTTP/1.1"`},
		{`"secrets":["github"]`, `"secrets":[]`},
		{`"intercepted":true,`, ``},
	} {
		first := bytes.Replace(lines[0], []byte(edit[0]), []byte(edit[1]), 1)
		if bytes.Equal(first, lines[0]) {
			t.Fatalf("the first line has no %s: %s", edit[0], lines[0])
		}
		_, err := audit.Verify(bytes.NewReader(join(append([][]byte{first}, lines[1:]...)...)))
		var be *audit.BreakError
		if !errors.As(err, &be) {
			t.Errorf("%s edited to %s: Verify = %v, want a break", edit[0], edit[1], err)
		}
	}
}
