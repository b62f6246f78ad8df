package main

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/runner/egress"
)

// TestEgressRecordCarriesTheInterceptedRequest: an intercepted request's
// audit line has its method, path, status, proto and secrets by name; the
// summary of omitted requests its count.
func TestEgressRecordCarriesTheInterceptedRequest(t *testing.T) {
	t.Parallel()
	ev := egress.Event{
		Time: time.Now(), Duration: 1500 * time.Millisecond, RunID: "r_1", QueryID: "q_1", Method: "DELETE", Host: "api.github.com", Port: 443,
		Decision: egress.Deny, Rule: "http.method", Reason: "read only", BytesUp: 10, BytesDown: 20, Error: "x",
		Intercepted: true, Path: "/repos/o/r", Status: 403, Proto: "HTTP/2.0", Secrets: []string{"github"}, Omitted: 3,
	}
	want := audit.Record{
		Kind: audit.KindEgress, RunID: "r_1", QueryID: "q_1", Method: "DELETE", Host: "api.github.com", Port: 443,
		Decision: "deny", Rule: "http.method", Reason: "read only", BytesUp: 10, BytesDown: 20, Error: "x", DurationMS: 1500,
		Intercepted: true, Path: "/repos/o/r", Status: 403, Proto: "HTTP/2.0", Secrets: []string{"github"}, OmittedRequests: 3,
	}
	if got := egressRecord(ev); !reflect.DeepEqual(got, want) {
		t.Errorf("egressRecord = %+v\nwant %+v", got, want)
	}
	var buf bytes.Buffer
	if err := (logEgress{log: slog.New(slog.NewTextHandler(&buf, nil))}).Egress(ev); err != nil {
		t.Fatal(err)
	}
	for _, kv := range []string{"method=DELETE", "path=/repos/o/r", "status=403", "secrets=[github]", "omitted=3", "rule=http.method"} {
		if !strings.Contains(buf.String(), kv) {
			t.Errorf("log line %q lacks %s", buf.String(), kv)
		}
	}
}

// TestEgressCAIsMadeOrKept: without a file the CA is made in memory;
// with one it is written once (0600) and the same CA is loaded again.
func TestEgressCAIsMadeOrKept(t *testing.T) {
	t.Parallel()
	mem, err := egressCA("")
	if err != nil || !bytes.Contains(mem.CertPEM(), []byte("BEGIN CERTIFICATE")) {
		t.Fatalf("egressCA(\"\") = %v, %v", mem, err)
	}
	file := filepath.Join(t.TempDir(), "ca.pem")
	a, err := egressCA(file)
	if err != nil {
		t.Fatal(err)
	}
	st, err := os.Stat(file)
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("the CA file: %v, %v; want mode 0600", st, err)
	}
	b, err := egressCA(file)
	if err != nil || !bytes.Equal(a.CertPEM(), b.CertPEM()) || bytes.Equal(a.CertPEM(), mem.CertPEM()) {
		t.Errorf("the CA loaded again differs from the one made (err %v)", err)
	}
	if _, err := egressCA(filepath.Join(file, "below-a-file")); err == nil || !strings.Contains(err.Error(), "--egress-ca-file") {
		t.Errorf("an unusable CA file: %v, want an error naming the flag", err)
	}
}
