package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// logReceiver is a decision-log service: it gunzips each POST, decodes
// its array of events and keeps them; down makes it answer 503.
type logReceiver struct {
	mu     sync.Mutex
	events []map[string]any
	down   bool
}

func (r *logReceiver) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.down {
		http.Error(w, "down", http.StatusServiceUnavailable)
		return
	}
	zr, err := gzip.NewReader(req.Body)
	if err != nil || req.Header.Get("Content-Encoding") != "gzip" {
		http.Error(w, "want gzip", http.StatusBadRequest)
		return
	}
	var evs []map[string]any
	if err := json.NewDecoder(zr).Decode(&evs); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.events = append(r.events, evs...)
	w.WriteHeader(http.StatusNoContent)
}

func (r *logReceiver) set(down bool) { r.mu.Lock(); r.down = down; r.mu.Unlock() }

// event returns the event of the decision line with this decision id.
func (r *logReceiver) event(decisionID string) map[string]any {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, ev := range r.events {
		if in, _ := ev["input"].(map[string]any); in["decision_id"] == decisionID {
			return ev
		}
	}
	return nil
}

// getReadyz gets /readyz from the sidecar on sock.
func getReadyz(t *testing.T, sock string) (int, map[string]any) {
	t.Helper()
	c := http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://gatekeeper/readyz")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	b, _ := io.ReadAll(resp.Body)
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("/readyz: %v: %s", err, b)
	}
	return resp.StatusCode, m
}

func TestServeShipsADecisionWithItsRevisionAndChainPosition(t *testing.T) {
	t.Parallel()
	rec := &logReceiver{}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	sock, token, ws, _ := serveAudit(t, "--audit-log", logPath, "--decision-log", srv.URL+"/logs",
		"--decision-log-label", "cluster=test", "--instance", "dl-serve", "--decision-log-min-backoff", "5ms")
	c := connect(t, sock, token)
	q := c.do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
	d := c.readFile(q, filepath.Join(ws, "a.txt"))
	id, _ := d["decision_id"].(string)
	var ev map[string]any
	for deadline := time.Now().Add(30 * time.Second); ev == nil; time.Sleep(10 * time.Millisecond) {
		if ev = rec.event(id); ev == nil && time.Now().After(deadline) {
			t.Fatalf("decision %s never reached the receiver", id)
		}
	}
	labels := ev["labels"].(map[string]any)
	result := ev["result"].(map[string]any)
	if labels["app"] != "gatekeeper" || labels["id"] != "dl-serve" || labels["cluster"] != "test" || ev["path"] != "gatekeeper/decision" ||
		result["decision"] != d["decision"] || ev["revision"] == "" || ev["revision"] != d["policy_revision"] {
		t.Fatalf("event %v for decision %v", ev, d)
	}
	pos := ev["custom"].(map[string]any)["audit"].(map[string]any)
	seq := int64(pos["seq"].(float64))
	b, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	lines := bytes.Split(bytes.TrimSuffix(b, []byte("\n")), []byte("\n"))
	line := lines[seq-1]
	sum := sha256.Sum256(line)
	if !bytes.Contains(line, []byte(id)) || pos["hash"] != hex.EncodeToString(sum[:]) || ev["decision_id"] != "dl-serve-"+strconv.FormatInt(seq, 10) {
		t.Fatalf("event at %v does not match local line %d: %s", pos, seq, line)
	}
	if code, st := getReadyz(t, sock); code != 200 || st["decision_log_backlog"] == nil {
		t.Fatalf("/readyz %d %v", code, st)
	}
}

func TestServeDeniesWhileTheDecisionLogBacklogIsFull(t *testing.T) {
	t.Parallel()
	rec := &logReceiver{down: true}
	srv := httptest.NewServer(rec)
	defer srv.Close()
	sock, token, ws, _ := serveAudit(t, "--audit-log", filepath.Join(t.TempDir(), "audit.jsonl"), "--decision-log", srv.URL+"/logs",
		"--decision-log-max-backlog", "5", "--decision-log-min-backoff", "5ms", "--decision-log-max-backoff", "20ms")
	c := connect(t, sock, token)
	q := c.do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
	file := filepath.Join(ws, "a.txt")
	var denied map[string]any
	for i := 0; i < 10 && denied == nil; i++ {
		if r := c.readFile(q, file); r["decision"] == "deny" {
			denied = r
		}
	}
	if denied == nil || denied["rule"] != "decision_log.backlog_full" || !strings.Contains(denied["reason"].(string), "cannot be reached") {
		t.Fatalf("with the receiver down and a bound of 5 lines: %v, want a deny by decision_log.backlog_full", denied)
	}
	code, st := getReadyz(t, sock)
	if code != http.StatusServiceUnavailable || st["decision_log_backlog"].(float64) < 5 {
		t.Fatalf("/readyz with the backlog full: %d %v", code, st)
	}
	rec.set(false)
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if r := c.readFile(q, file); r["decision"] == "allow" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("decisions still denied 30 s after the receiver came back")
		}
	}
	// The allowed decision's own line may fill the small bound again for
	// a moment, until the shipper sends it.
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		code, st := getReadyz(t, sock)
		if code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz still %d 30 s after the receiver came back: %v", code, st)
		}
	}
}
