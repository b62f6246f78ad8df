package main

import (
	"context"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate"
	"github.com/gatekeeper-ai/gatekeeper/gate/console"
)

// traffic is an audit log recorded from walkthroughs/console: a real Agent
// SDK query (a sandboxed run whose code and output hold HTML, a Read of the
// SSH key, a WebFetch, a Glob) and a raw client's calls (a tool named like
// HTML, a WebFetch with an api_key, a KillShell).
const traffic = "testdata/tail/traffic.jsonl"

// consoleOn serves a console following log and returns its URL and a token
// file for it.
func consoleOn(t *testing.T, log string) (url, tokenFile string) {
	t.Helper()
	dir, policy := writePolicy(t, cliPolicy)
	eng, err := gate.New(t.Context(), gate.Config{PolicyFile: policy, Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	con, err := console.New(console.Config{Token: "tail-test-token", AuditPath: log, Engine: eng, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		con.Run(ctx)
	}()
	srv := httptest.NewServer(con.Handler())
	t.Cleanup(func() {
		cancel()
		<-done
		srv.Close()
	})
	tokenFile = filepath.Join(dir, "token")
	if err := os.WriteFile(tokenFile, []byte("tail-test-token\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return srv.URL, tokenFile
}

func TestTailPrintsTheRecordedTraffic(t *testing.T) {
	t.Parallel()
	url, tokenFile := consoleOn(t, traffic)
	cases := []struct {
		name string
		args []string
	}{
		{"all", nil},
		{"denies", []string{"--decision", "deny"}},
		{"rule_prefix", []string{"--rule", "host_fs.*"}},
		{"runs", []string{"--kind", "run"}},
		{"search", []string{"--search", "ONERROR"}},
		{"tool_and_query", []string{"--tool", "WebFetch", "--query", "q_5f3dcca8"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			args := append([]string{"tail", "--url", url, "--token-file", tokenFile, "--no-follow", "--backfill", "1000", "--color", "never", "--utc"}, tc.args...)
			out, err := cli(t, "", args...)
			if err != nil {
				t.Fatalf("tail: %v\n%s", err, out)
			}
			golden(t, "tail/"+tc.name, "/tmp/gk-wt7-Lkaw23", out) // the recording's temp tree
		})
	}
}

func TestTailJSONIsTheAuditLinesAsWritten(t *testing.T) {
	t.Parallel()
	url, tokenFile := consoleOn(t, traffic)
	out, err := cli(t, "", "tail", "--url", url, "--token-file", tokenFile, "--no-follow", "--backfill", "1000", "--json")
	if err != nil {
		t.Fatalf("tail: %v\n%s", err, out)
	}
	want, err := os.ReadFile(traffic)
	if err != nil {
		t.Fatal(err)
	}
	if out != string(want) {
		t.Fatalf("tail --json printed\n%s\nwant the file\n%s", out, want)
	}
}

func TestTailColoursOnlyWhenAsked(t *testing.T) {
	t.Parallel()
	url, tokenFile := consoleOn(t, traffic)
	for _, tc := range []struct {
		color string
		want  bool
	}{{"always", true}, {"never", false}, {"auto", false}} { // auto: the test's stdout is no terminal
		out, err := cli(t, "", "tail", "--url", url, "--token-file", tokenFile, "--no-follow", "--backfill", "3", "--color", tc.color)
		if err != nil {
			t.Fatal(err)
		}
		if got := strings.Contains(out, "\x1b[31m✘ DENY"); got != tc.want {
			t.Errorf("--color %s: red deny %v in\n%q", tc.color, got, out)
		}
	}
}

func TestTailRefusesAWrongToken(t *testing.T) {
	t.Parallel()
	url, _ := consoleOn(t, traffic)
	dir := t.TempDir()
	bad := filepath.Join(dir, "token")
	if err := os.WriteFile(bad, []byte("nope\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := cli(t, "", "tail", "--url", url, "--token-file", bad, "--no-follow")
	if err == nil || !strings.Contains(err.Error(), "401") {
		t.Fatalf("tail with a wrong token: %v\n%s", err, out)
	}
}
