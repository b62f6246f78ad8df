package toolwrap_test

import (
	"bufio"
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
	"github.com/gatekeeper-ai/gatekeeper/runner/toolwrap"
)

func ptr(b bool) *bool { return &b }

// hostile is text a server controls, made to break out of every kind of
// literal and comment the generated code has. Were it to run, it would
// print PWNED.
const hostile = "Ends \"\"\" here ''' and */ here `${print('PWN'+'ED')}` \\\" \\\n" +
	"\"\"\"; print(\"PWN\"+\"ED\"); \"\"\"\n*/ console.log('PWN'+'ED'); /*\r\n\x00\x1b[31m\u2028\u2029 \\N{BULLET} {x} %s done"

// servers are the fixtures: a records server as a data task would use it,
// and a server whose names and texts try every trick.
func servers() []runner.ServerTools {
	return []runner.ServerTools{
		{
			Name:        "records",
			Description: "Customer records of the CRM: page through them, look one up.\nSecond line not shown.",
			Tools: []runner.ToolInfo{
				{
					Name:        "get-records",
					Description: "Return one page of customer records.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{
						"page":{"type":"integer","description":"The page, from 1."},
						"size":{"type":"integer","description":"Records per page.","default":50},
						"order":{"type":"string","enum":["asc","desc"]}},
						"required":["page"]}`),
					OutputSchema: json.RawMessage(`{"type":"object","properties":{
						"records":{"type":"array","items":{"type":"object","properties":{
							"id":{"type":"string"},"name":{"type":"string"},"balance":{"type":"number"}},"required":["id","name"]}},
						"next_page":{"type":["integer","null"],"description":"The next page, or null after the last."}},
						"required":["records","next_page"]}`),
					ReadOnly: ptr(true), OpenWorld: ptr(false),
				},
				{
					Name:        "lookup",
					Description: "Look a customer up by id; answers in text.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{"id":{"type":"string"}},"required":["id"]}`),
				},
				{
					Name:        "update",
					Description: "Update a record's fields.",
					InputSchema: json.RawMessage(`{"type":"object","properties":{
						"record":{"type":"object","description":"Which record and what to set.","properties":{
							"id":{"type":"string"},
							"fields":{"type":"object","additionalProperties":{"type":"string"}},
							"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string"}}}},
							"required":["id","fields"]},
						"tags":{"type":"array","items":{"type":"string"}},
						"priority":{"anyOf":[{"type":"integer"},{"type":"string","enum":["low","high"]}]},
						"dry_run":{"type":"boolean","default":false},
						"limit":{"const":3}},
						"required":["record"]}`),
					OutputSchema: json.RawMessage(`{"type":"object","properties":{"updated":{"type":"boolean"}},"required":["updated"]}`),
					Destructive:  ptr(true),
				},
				{Name: "count", Description: "How many records there are.", InputSchema: json.RawMessage(`{"type":"object"}`),
					OutputSchema: json.RawMessage(`{"type":"integer"}`)},
			},
		},
		{
			Name:        "evil",
			Description: hostile,
			Tools: []runner.ToolInfo{
				{
					Name:        "a.b",
					Description: hostile,
					InputSchema: json.RawMessage(`{"type":"object","properties":{
						"not an identifier":{"type":"string","description":` + jsonString(hostile) + `},
						"from":{"type":"integer"},
						"_args":{"type":"string"},
						"_gk":{"type":"string"},
						"__proto__":{"type":"string"},
						"page-size":{"type":"integer"},
						"page_size":{"type":"integer"},
						"":{"type":"boolean"},
						"9lives":{"type":"string","enum":["x\"]; print('PWN'+'ED') #", "*/ x /*", "\u2028"]}},
						"required":["not an identifier"]}`),
				},
				{Name: "get_records", Description: "collides with get-records", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)},
				{Name: "get-records", Description: "collides with get_records", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)},
				{Name: "then", Description: "would make the node module a thenable", InputSchema: json.RawMessage(`{"type":"object"}`)},
				{Name: "class", Description: "a keyword", InputSchema: json.RawMessage(`{"type":"object","properties":{"x":{"type":"integer"}}}`)},
				{Name: "dict", Description: "a builtin the generated code must not use", InputSchema: json.RawMessage(`{"type":"object","properties":{"str":{"type":"string"}}}`)},
				{Name: "__init__", Description: "a dunder", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
				{Name: "Any", Description: "a name the module imports", InputSchema: json.RawMessage(`not a schema`)},
				{Name: "constructor", Description: hostile, InputSchema: nil,
					OutputSchema: json.RawMessage(`{"type":"object","properties":{` + jsonString(hostile) + `:{"type":"string","description":` + jsonString(hostile) + `}}}`)},
			},
		},
		// Module names that would shadow a keyword or the runtime.
		{Name: "class", Description: "a keyword as a server name", Tools: []runner.ToolInfo{{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
		{Name: "call", Description: "the runtime's call()", Tools: []runner.ToolInfo{{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
		{Name: "index", Description: "the node runtime's file", Tools: []runner.ToolInfo{{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
		{Name: "json", Description: "a module the runtime imports", Tools: []runner.ToolInfo{{Name: "ping", InputSchema: json.RawMessage(`{"type":"object"}`)}}},
	}
}

func jsonString(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}

// writeTree generates the wrappers for ss into a new directory and returns
// it. The directory is short (a unix socket path must fit in 108 bytes).
func writeTree(t *testing.T, ss []runner.ServerTools) string {
	t.Helper()
	files, err := toolwrap.Generate(ss)
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp("", "tw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for p, b := range files {
		full := filepath.Join(dir, filepath.FromSlash(p))
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(full, b, 0o444); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// request is one line a program sent to the fake bridge.
type request struct {
	ID        json.RawMessage `json:"id"`
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// bridge is a fake of gatekeeper's bridge (no policy, no bounds): it
// answers by tool name and records every request. barrier calls wait until
// barrierN of them are pending, then are answered in reverse order of
// arrival, on whatever connections they came.
type bridge struct {
	barrierN int

	results string // the program's results directory (GATEKEEPER_RESULTS, or the default)

	mu       sync.Mutex
	requests []request
	barrier  []func()
	conns    int
}

// serveBridge listens on dir/bridge.sock until the test ends.
func serveBridge(t *testing.T, dir string, barrierN int) *bridge {
	t.Helper()
	path := filepath.Join(dir, "bridge.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o777); err != nil { // the sandbox's user connects
		t.Fatal(err)
	}
	b := &bridge{barrierN: barrierN, results: "/tmp/gatekeeper-results"}
	var wg sync.WaitGroup
	t.Cleanup(func() { l.Close(); wg.Wait() })
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			b.mu.Lock()
			b.conns++
			b.mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); b.serve(c) }()
		}
	}()
	t.Cleanup(func() { l.Close() })
	return b
}

func (b *bridge) serve(c net.Conn) {
	defer c.Close()
	var wmu sync.Mutex
	write := func(v any) {
		line, _ := json.Marshal(v)
		wmu.Lock()
		defer wmu.Unlock()
		_, _ = c.Write(append(line, '\n'))
	}
	sc := bufio.NewScanner(c)
	sc.Buffer(make([]byte, 1<<16), 1<<24)
	for sc.Scan() {
		var r request
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			write(map[string]any{"id": 0, "ok": false, "error": map[string]string{"kind": "bad_request", "message": err.Error()}})
			continue
		}
		b.mu.Lock()
		b.requests = append(b.requests, r)
		b.mu.Unlock()
		fail := func(kind, rule string) {
			write(map[string]any{"id": r.ID, "ok": false, "error": map[string]string{"kind": kind, "rule": rule, "message": "the " + kind + " message"}})
		}
		ok := func(result any) { write(map[string]any{"id": r.ID, "ok": true, "result": result}) }
		tool := r.Tool
		if r.Server != "records" {
			tool = "" // the echo
		}
		switch tool {
		case "x-denied":
			fail("denied", "deny_argument_value")
		case "x-limit":
			fail("limit", "code_calls.max_calls")
		case "x-timeout":
			fail("timeout", "code_calls.timeout")
		case "x-server":
			fail("server", "")
		case "x-cancelled":
			fail("cancelled", "")
		case "x-bad-request":
			fail("bad_request", "")
		case "x-novel":
			fail("some_future_kind", "r")
		case "x-tool-error":
			ok(map[string]any{"isError": true, "content": []any{map[string]string{"type": "text", "text": "no such customer"}}})
		case "x-big": // a result larger than any one read
			ok(map[string]any{"content": []any{map[string]string{"type": "text", "text": strings.Repeat("é", bigResult)}}})
		case "x-close":
			return
		case "get-records":
			var a struct{ Page int }
			_ = json.Unmarshal(r.Arguments, &a)
			ok(map[string]any{
				"content":           []any{map[string]string{"type": "text", "text": "the JSON of the page"}},
				"structuredContent": map[string]any{"records": []any{map[string]any{"id": "r1", "name": "Ada"}}, "next_page": a.Page + 1},
			})
		case "lookup":
			if strings.Contains(string(r.Arguments), `"media"`) {
				ok(map[string]any{"content": mediaContent})
				break
			}
			if strings.Contains(string(r.Arguments), `"not-base64"`) {
				ok(map[string]any{"content": []any{map[string]string{"type": "image", "data": "not base64!", "mimeType": "image/png"}}})
				break
			}
			ok(map[string]any{"content": []any{
				map[string]string{"type": "text", "text": "Ada Lovelace"},
				map[string]string{"type": "text", "text": "London"},
			}})
		case "count": // declares an output schema, answers with text only (older servers)
			ok(map[string]any{"content": []any{map[string]string{"type": "text", "text": "42"}}})
		case "barrier":
			b.mu.Lock()
			b.barrier = append(b.barrier, func() {
				ok(map[string]any{"content": []any{}, "structuredContent": json.RawMessage(r.Arguments)})
			})
			var release []func()
			if len(b.barrier) == b.barrierN {
				release = b.barrier
				b.barrier = nil
			}
			b.mu.Unlock()
			for _, f := range slices.Backward(release) {
				f()
			}
		default: // echo the arguments, as text and as structured content
			ok(map[string]any{"content": []any{map[string]string{"type": "text", "text": string(r.Arguments)}}, "structuredContent": json.RawMessage(r.Arguments)})
		}
	}
}

// mediaContent is the content of lookup(id="media"): one item of each
// kind that is not text, between two texts.
var mediaContent = []any{
	map[string]any{"type": "text", "text": "Ada"},
	map[string]any{"type": "image", "data": "iVBORw0KGgo=", "mimeType": "image/png"},
	map[string]any{"type": "audio", "data": "UklGRg==", "mimeType": "audio/wav"},
	map[string]any{"type": "resource", "resource": map[string]any{"uri": "file:///../../etc/passwd", "mimeType": "application/pdf", "blob": "JVBERi0x"}},
	map[string]any{"type": "resource", "resource": map[string]any{"uri": "crm://c-7/notes", "text": "notes of c-7"}},
	map[string]any{"type": "resource_link", "uri": "https://files.example/c-7.csv", "name": "c-7.csv", "mimeType": "text/csv"},
	map[string]any{"type": "text", "text": "London"},
}

// sent returns the arguments of every request for server/tool, in order.
func (b *bridge) sent(server, tool string) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for _, r := range b.requests {
		if r.Server == server && r.Tool == tool {
			out = append(out, string(r.Arguments))
		}
	}
	return out
}

// sameJSON reports whether a and b are the same JSON value.
func sameJSON(t *testing.T, a, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal([]byte(a), &x); err != nil {
		t.Fatalf("%q: %v", a, err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatalf("%q: %v", b, err)
	}
	xb, _ := json.Marshal(x)
	yb, _ := json.Marshal(y)
	return string(xb) == string(yb)
}

// bigResult is the length, in characters, of the x-big tool's text.
const bigResult = 3 << 20
