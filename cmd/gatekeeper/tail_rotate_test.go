package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// setLines reads the rotated log at path, oldest line first.
func setLines(t *testing.T, path string) []string {
	t.Helper()
	files, err := audit.Files(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for l, err := range audit.Lines(files) {
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, string(l.Text))
	}
	return out
}

// sameLines fails unless got is want, naming the first line lost or
// repeated.
func sameLines(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := range min(len(got), len(want)) {
		if got[i] != want[i] {
			t.Fatalf("%s: line %d of %d is\n%s\nwant\n%s", what, i+1, len(want), got[i], want[i])
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%s: %d lines, want the log's %d", what, len(got), len(want))
	}
}

func TestTailShowsEveryRecordOnceAcrossRotations(t *testing.T) {
	t.Parallel()
	logPath := filepath.Join(t.TempDir(), "audit.jsonl")
	sock, token, ws, stop := serveAudit(t, "--ui", "--audit-log", logPath, "--audit-max-bytes", "1k")
	c := connect(t, sock, token)
	q := c.do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
	c.readFile(q, filepath.Join(ws, "before.txt"))

	// A tail that follows from the start while the log rotates under it.
	// A generous bound: if it is ever reached, records were lost.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	out := &syncWriter{b: &strings.Builder{}}
	done := make(chan error, 1)
	go func() {
		done <- run(ctx, []string{"tail", "--url", "unix://" + sock, "--token-file", token, "--backfill", "100000", "--json"}, strings.NewReader(""), out, out)
	}()
	// Four clients at once, so that rotations come in bursts.
	errs := make(chan error, 4)
	clients := []*wsClient{c}
	for k := range 4 {
		c := connect(t, sock, token)
		clients = append(clients, c)
		q := c.do(`{"type":"open_query","id":"o"}`)["query_id"].(string)
		go func() {
			for i := range 30 {
				if r := c.readFile(q, filepath.Join(ws, fmt.Sprintf("c%d-%d.txt", k, i))); r["decision"] != "allow" {
					errs <- fmt.Errorf("client %d, decision %d = %v, want allow", k, i, r)
					return
				}
			}
			errs <- nil
		}()
	}
	for range 4 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := setLines(t, logPath)
	if files, _ := audit.Files(logPath); len(files) < 10 {
		t.Fatalf("%d files: the test wants many rotations", len(files))
	}
	for ctx.Err() == nil && strings.Count(out.String(), "\n") < len(want) {
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("tail: %v", err)
	}
	sameLines(t, "tail, following", strings.Split(strings.TrimSuffix(out.String(), "\n"), "\n"), want)

	// A sidecar started again on the log reads its history back from the
	// rotated files: tail --backfill gets every record once more.
	for _, c := range clients {
		c.ws.Close()
	}
	if err := stop(); err != nil {
		t.Fatalf("serve: %v", err)
	}
	sock, token, _, _ = serveAudit(t, "--ui", "--audit-log", logPath, "--audit-max-bytes", "1k")
	back, err := cli(t, "", "tail", "--url", "unix://"+sock, "--token-file", token, "--backfill", "100000", "--no-follow", "--json")
	if err != nil {
		t.Fatalf("tail --no-follow: %v\n%s", err, back)
	}
	sameLines(t, "tail --backfill after a restart", strings.Split(strings.TrimSuffix(back, "\n"), "\n"), want)

	// The overview's chain runs through every file, from seq 1.
	tok, err := os.ReadFile(token)
	if err != nil {
		t.Fatal(err)
	}
	hc := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	req, _ := http.NewRequestWithContext(t.Context(), "GET", "http://gk/ui/api/overview", nil)
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(string(tok)))
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var o struct {
		Chain struct {
			State    string `json:"state"`
			Lines    int    `json:"lines"`
			FirstSeq int64  `json:"first_seq"`
		} `json:"chain"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&o); err != nil {
		t.Fatal(err)
	}
	if o.Chain.State != "ok" || o.Chain.Lines != len(want) || o.Chain.FirstSeq != 1 {
		t.Fatalf("the overview's chain %+v, want ok over all %d lines from seq 1", o.Chain, len(want))
	}
}
