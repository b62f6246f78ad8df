package wire

import (
	"bytes"
	"encoding/json"
	"io"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzDecode checks that Decode never panics, that it refuses exactly the
// frames encoding/json finds invalid (malformed_frame) or that repeat a key
// (duplicate_key, checked against a json.Decoder.Token walk), and that any
// frame it accepts marshals back to JSON that decodes to the same request.
// Seeds are in testdata/fuzz/FuzzDecode; run it with
// go test ./gate/wire -run '^$' -fuzz FuzzDecode -fuzztime 30s
func FuzzDecode(f *testing.F) {
	for _, base := range [][]kv{validHello, validOpenQuery, validDecide, validRun, validCloseQuery} {
		f.Add([]byte(frame(base)))
	}
	// The frames of a query's in-process tools (testdata/sdk-tools.json).
	f.Add([]byte(`{"type":"open_query","id":"2","sdk_servers":[{"name":"notes","description":"d","tools":[{"name":"search","inputSchema":{"type":"object"},"outputSchema":{},"annotations":{"readOnlyHint":true}}]}]}`))
	f.Add([]byte(`{"type":"tool_result","id":"t_1","result":{"content":[]}}`))
	f.Add([]byte(`{"type":"tool_result","id":"t_2","error":"no such tool"}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		req, e := Decode(data)
		if (req == nil) == (e == nil) {
			t.Fatalf("Decode(%q) = %#v, %#v: want exactly one of a request and an error frame", data, req, e)
		}
		if dr, de := DecodeDryRun(data, EventPreToolUse, EventCanUseTool); (dr == nil) == (de == nil) {
			t.Fatalf("DecodeDryRun(%q) = %#v, %#v: want exactly one of a call and an error frame", data, dr, de)
		}
		if d, ok := req.(*Decide); ok {
			sameCallAsDryRun(t, d)
		}
		// encoding/json judges validity only up to its own depth limit of
		// 10000, which a frame shorter than that cannot reach.
		judge := utf8.Valid(data) && len(data) < 10000
		validObject := judge && json.Valid(data) && bytes.TrimLeft(data, " \t\r\n")[0] == '{'
		if e != nil {
			if out, err := Encode(e); err != nil || !json.Valid(out) {
				t.Fatalf("Encode(%#v) = %s, %v: want a valid error frame", e, out, err)
			}
			if judge && (e.Code == CodeMalformedFrame) == validObject {
				t.Fatalf("Decode(%q) = %s (%s), but encoding/json says valid object: %v", data, e.Code, e.Message, validObject)
			}
			if validObject {
				if dup := hasDuplicate(t, data); (e.Code == CodeDuplicateKey) != dup {
					t.Fatalf("Decode(%q) = %s (%s), but the reference says repeated key: %v", data, e.Code, e.Message, dup)
				}
			}
			return
		}
		if !utf8.Valid(data) || !json.Valid(data) {
			t.Fatalf("Decode(%q) accepted a frame that is not valid JSON", data)
		}
		if judge && hasDuplicate(t, data) {
			t.Fatalf("Decode(%q) accepted a frame that the reference says repeats a key", data)
		}
		out, err := json.Marshal(req)
		if err != nil {
			t.Fatalf("json.Marshal(%#v): %v", req, err)
		}
		again, e := Decode(out)
		if e != nil {
			t.Fatalf("Decode(%q) = %#v, which marshals to %s, which Decode refuses: %v", data, req, out, e)
		}
		if !sameRequest(t, req, again) {
			t.Fatalf("Decode(%q) = %#v, which marshals to %s, which decodes to %#v", data, req, out, again)
		}
	})
}

// sameRequest compares requests, json.RawMessage fields by meaning.
func sameRequest(t *testing.T, a, b Request) bool {
	t.Helper()
	raw := func(r Request) (Request, []json.RawMessage) {
		switch r := r.(type) {
		case *OpenQuery:
			c := *r
			c.SandboxPolicy = nil
			return &c, []json.RawMessage{r.SandboxPolicy}
		case *Decide:
			c := *r
			c.ToolInput = nil
			return &c, []json.RawMessage{r.ToolInput}
		}
		return r, nil
	}
	ra, rawA := raw(a)
	rb, rawB := raw(b)
	if !reflect.DeepEqual(ra, rb) {
		return false
	}
	for i := range rawA {
		if !reflect.DeepEqual(meaning(t, rawA[i]), meaning(t, rawB[i])) {
			return false
		}
	}
	return true
}

// meaning decodes a JSON value with numbers kept as written.
func meaning(t *testing.T, raw []byte) any {
	t.Helper()
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("decode %s: %v", raw, err)
	}
	return v
}

// hasDuplicate is the reference for duplicate_key, written independently of
// the scanner with json.Decoder.Token: it reports whether an object within
// MaxDepth repeats a key, where the frame's own keys and those of a
// top-level "mcp_server" object also repeat when they differ only in case.
// data must be valid JSON.
func hasDuplicate(t *testing.T, data []byte) bool {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var stack []*refObject
	lastTopKey := ""
	for {
		tok, err := d.Token()
		if err == io.EOF {
			return false
		}
		if err != nil {
			t.Fatalf("reference walk of %q: %v", data, err)
		}
		var top *refObject
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		if top != nil && top.isObj && top.wantKey {
			if delim, ok := tok.(json.Delim); ok && delim == '}' {
				stack = stack[:len(stack)-1]
				markValue(stack)
				continue
			}
			key := tok.(string)
			if len(stack) <= MaxDepth {
				for _, k := range top.keys {
					if k == key || top.fold && strings.EqualFold(k, key) {
						return true
					}
				}
				top.keys = append(top.keys, key)
			}
			if len(stack) == 1 {
				lastTopKey = key
			}
			top.wantKey = false
			continue
		}
		switch tok {
		case json.Delim('{'):
			fold := len(stack) == 0 || len(stack) == 1 && lastTopKey == "mcp_server"
			stack = append(stack, &refObject{isObj: true, fold: fold, wantKey: true})
		case json.Delim('['):
			stack = append(stack, &refObject{})
		case json.Delim(']'), json.Delim('}'):
			stack = stack[:len(stack)-1]
			markValue(stack)
		default:
			markValue(stack)
		}
	}
}

// refObject is an open container of the reference walk.
type refObject struct {
	keys  []string
	fold  bool
	isObj bool
	// wantKey is true where the next token of an object is a key or '}'.
	wantKey bool
}

// markValue notes that a value ended in the innermost container.
func markValue(stack []*refObject) {
	if n := len(stack); n > 0 && stack[n-1].isObj {
		stack[n-1].wantKey = true
	}
}

// sameCallAsDryRun checks that the decide frame d, without its type, id
// and query_id, is read by DecodeDryRun as the same call: `gatekeeper
// decide` and `serve` judge one call alike.
func sameCallAsDryRun(t *testing.T, d *Decide) {
	t.Helper()
	out, err := json.Marshal(d)
	if err != nil {
		t.Fatalf("json.Marshal(%#v): %v", d, err)
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(out, &m); err != nil {
		t.Fatal(err)
	}
	delete(m, "type")
	delete(m, "id")
	delete(m, "query_id")
	call, err := json.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	dr, e := DecodeDryRun(call, EventPreToolUse, EventCanUseTool)
	if e != nil {
		t.Fatalf("DecodeDryRun(%s) refuses the call of a decide frame Decode accepted: %v", call, e)
	}
	got, want := dr.Decide, *d
	want.ID, want.QueryID = "", ""
	// Re-marshalling rewrites tool_input (json.Marshal compacts a
	// RawMessage and escapes <, > and & in it); compare it by meaning.
	if !reflect.DeepEqual(meaning(t, got.ToolInput), meaning(t, want.ToolInput)) {
		t.Fatalf("DecodeDryRun(%s) reads tool_input %s; Decode read %s", call, got.ToolInput, want.ToolInput)
	}
	got.ToolInput, want.ToolInput = nil, nil
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("DecodeDryRun(%s) = %#v; Decode read %#v", call, got, want)
	}
}
