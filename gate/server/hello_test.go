package server_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorilla/websocket"

	"github.com/gatekeeper-ai/gatekeeper/internal/goldenfile"
)

// update rewrites the golden files: go test ./gate/server -run Golden -update
var update = flag.Bool("update", false, "rewrite the golden files under testdata/golden")

// TestSecondHelloIsRefusedAndTheClientNameStays sends further hellos, with
// another client name, while the connection's workers decide calls. Each is
// refused with hello_repeated, the connection keeps serving, and every
// decision is audited under the first hello's client name. Run with -race:
// a second hello must not rewrite the name the workers are reading.
func TestSecondHelloIsRefusedAndTheClientNameStays(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	ws, _, err := h.dial(t, http.Header{"Authorization": {"Bearer " + h.token}})
	must(t, err)
	t.Cleanup(func() { ws.Close() })
	c := &client{t: t, ws: ws}
	if r := c.do(`{"type":"hello","id":"h","v":1,"client":"first"}`); r["type"] != "welcome" {
		t.Fatalf("hello: %v", r)
	}
	q := c.open("")
	const decisions, hellos = 48, 12
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		for i := range decisions {
			// Writes from one goroutine only, as gorilla/websocket requires.
			_ = ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"decide","id":"d%d","query_id":%q,"event":"PreToolUse","tool_name":"Bash","tool_input":{},"tool_use_id":"t%d"}`, i, q, i))
			if i%(decisions/hellos) == 0 {
				_ = ws.WriteMessage(websocket.TextMessage, fmt.Appendf(nil, `{"type":"hello","id":"again%d","v":1,"client":"second"}`, i))
			}
		}
	}()
	var gotDecisions, gotRefusals int
	for gotDecisions < decisions || gotRefusals < hellos {
		r := c.recv()
		switch r["type"] {
		case "decision":
			if r["rule"] != "tools.not_allowlisted" && r["rule"] != "tools.deny_list" {
				t.Fatalf("decision: %v", r)
			}
			gotDecisions++
		case "error":
			if r["code"] != "hello_repeated" {
				t.Fatalf("error: %v", r)
			}
			gotRefusals++
		default:
			t.Fatalf("unexpected frame %v", r)
		}
	}
	<-wrote // the writer may still be finishing its last frame after its reply came
	// The connection lives, and the name did not change.
	if r := c.decide(q, "Read", `{"file_path":"a.txt"}`, "toolu_after", ""); r["decision"] != "allow" {
		t.Fatalf("decide after the refused hellos: %v", r)
	}
	f, err := os.Open(h.auditPath)
	must(t, err)
	defer f.Close()
	lines := 0
	for sc := bufio.NewScanner(f); sc.Scan(); {
		var rec struct {
			Kind   string `json:"kind"`
			Client string `json:"client"`
		}
		must(t, json.Unmarshal(sc.Bytes(), &rec))
		if rec.Client != "first" {
			t.Errorf("audit line %d (%s) has client %q; want the first hello's %q", lines+1, rec.Kind, rec.Client, "first")
		}
		lines++
	}
	if want := 1 + decisions + 1; lines != want { // open_query, the decisions, the one after
		t.Errorf("audit has %d lines; want %d", lines, want)
	}
}

// TestGoldenSecondHello pins the error frame of a second hello, as
// docs/protocol.md shows it, in testdata/golden/a_second_hello_is_refused.json.
func TestGoldenSecondHello(t *testing.T) {
	t.Parallel()
	h := start(t, options{})
	c := h.connect(t)
	const frame = `{"type":"hello","id":"2","v":1,"client":"someone-else"}`
	c.send(frame)
	_ = c.ws.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, reply, err := c.ws.ReadMessage()
	must(t, err)
	checkGolden(t, "a_second_hello_is_refused.json", frame, reply)
}

// checkGolden compares a request frame and its reply with the golden file
// testdata/golden/name (rewritten with -update).
func checkGolden(t *testing.T, name, frame string, reply []byte) {
	t.Helper()
	in, err := json.Marshal(frame)
	must(t, err)
	got := fmt.Appendf(nil, "{\n  \"input\": %s,\n  \"output\": %s\n}\n", in, reply)
	path := filepath.Join("testdata", "golden", name)
	if *update {
		goldenfile.Write(t, path, got)
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./gate/server -run Golden -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs:\ngot:\n%s\nwant:\n%s", path, got, want)
	}
}
