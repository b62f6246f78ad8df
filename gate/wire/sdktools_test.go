package wire

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// sdkFrames reads testdata/sdk-tools.json, which @gatekeeper/client's
// sdk-tools.test.ts reads too: each frame's compact bytes, by name.
func sdkFrames(t *testing.T) map[string][]byte {
	t.Helper()
	return sharedFrames(t, "sdk-tools.json")
}

// sharedFrames reads a file of frames under testdata that the TypeScript
// client's tests read too: each frame's compact bytes, by name.
func sharedFrames(t *testing.T, file string) map[string][]byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", file))
	if err != nil {
		t.Fatal(err)
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	out := map[string][]byte{}
	for k, v := range raw {
		var b bytes.Buffer
		if err := json.Compact(&b, v); err != nil {
			t.Fatal(err)
		}
		out[k] = b.Bytes()
	}
	return out
}

// TestTheSharedSDKFramesDecodeAndEncodeAsTheClientHasThem pins the Go
// side of the in-process tools' frames to the file the TypeScript client
// is pinned to: its requests decode to these values, and the sidecar's
// frames encode to the file's bytes.
func TestTheSharedSDKFramesDecodeAndEncodeAsTheClientHasThem(t *testing.T) {
	t.Parallel()
	f := sdkFrames(t)
	yes, no := true, false
	wantOpen := &OpenQuery{ID: "2", SDKServers: []SDKServer{{Name: "notes", Description: "the team's notes", Tools: []SDKTool{{
		Name: "search", Description: "Search the notes for a phrase.",
		InputSchema: json.RawMessage(`{"$schema":"http://json-schema.org/draft-07/schema#","type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`),
		Annotations: &SDKAnnotations{ReadOnlyHint: &yes, OpenWorldHint: &no},
	}}}}}
	for name, want := range map[string]Request{
		"open_query":        wantOpen,
		"tool_result":       &ToolResult{ID: "t_1", Result: json.RawMessage(`{"content":[{"type":"text","text":"2 notes match gvisor"}]}`)},
		"tool_result_error": &ToolResult{ID: "t_2", Error: `this client declared no tool "drop" of server "notes"`},
	} {
		got, e := Decode(f[name])
		if e != nil {
			t.Fatalf("%s: Decode = %+v", name, e)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: Decode = %#v, want %#v", name, got, want)
		}
		// A Go client (gate/client) writes the same bytes.
		if b, err := json.Marshal(want); err != nil || !bytes.Equal(b, f[name]) {
			t.Errorf("%s: Marshal = %s (%v), want %s", name, b, err, f[name])
		}
	}
	for name, reply := range map[string]Reply{
		"tool_call":   ToolCall{ID: "t_1", QueryID: "q_6b0c", Server: "notes", Tool: "search", Arguments: json.RawMessage(`{"q":"gvisor"}`), TimeoutMS: 30000},
		"tool_cancel": ToolCancel{ID: "t_1", QueryID: "q_6b0c"},
	} {
		got, err := Encode(reply)
		if err != nil || !bytes.Equal(got, f[name]) {
			t.Errorf("%s: Encode = %s (%v), want %s", name, got, err, f[name])
		}
		checkGolden(t, "reply_"+name, append(got, '\n'))
	}
	info := wantOpen.SDKServers[0].Tools[0].Info()
	if info.Name != "search" || info.ReadOnly == nil || !*info.ReadOnly || info.OpenWorld == nil || *info.OpenWorld || info.Destructive != nil {
		t.Errorf("Info() = %+v; want the hints as declared, destructiveHint unset", info)
	}
}

func TestSDKFramesRefuseWhatTheSidecarCannotRelay(t *testing.T) {
	t.Parallel()
	f := sdkFrames(t)
	open := string(f["open_query"])
	tool := `{"name":"search","inputSchema":{"type":"object"}}`
	server := func(name, tools string) string {
		return `{"type":"open_query","id":"2","sdk_servers":[{"name":"` + name + `","tools":[` + tools + `]}]}`
	}
	many := func(n int, item string) string { return strings.TrimSuffix(strings.Repeat(item+",", n), ",") }
	for _, tc := range []struct{ name, frame, code, msg string }{
		{"a tool_result with both result and error", `{"type":"tool_result","id":"t_1","result":{},"error":"x"}`, CodeInvalidField, `exactly one of "result" and "error"`},
		{"a tool_result with neither", `{"type":"tool_result","id":"t_1"}`, CodeInvalidField, `exactly one of "result" and "error"`},
		{"a tool_result whose result is an array", `{"type":"tool_result","id":"t_1","result":[]}`, CodeInvalidField, `field "result" must be an object`},
		{"a tool_result with an empty error", `{"type":"tool_result","id":"t_1","error":""}`, CodeInvalidField, `field "error" must not be empty`},
		{"a tool_result with a null result", `{"type":"tool_result","id":"t_1","result":null}`, CodeInvalidField, `field "result" must be an object, not null`},
		{"a tool_result without id", `{"type":"tool_result","result":{}}`, CodeMissingField, `missing field "id"`},
		{"a server name that is no module name", server("My-Tools", tool), CodeInvalidField, `"sdk_servers[0].name" must be a lower-case name`},
		{"gatekeeper's own server name", server("sandboxed_code", tool), CodeInvalidField, `is gatekeeper's own server`},
		{"a server declared twice", `{"type":"open_query","id":"2","sdk_servers":[{"name":"a","tools":[]},{"name":"a","tools":[]}]}`, CodeInvalidField, `server "a" is declared twice`},
		{"a tool declared twice", server("notes", tool+","+tool), CodeInvalidField, `tool "search" is declared twice`},
		{"a tool without inputSchema", server("notes", `{"name":"search"}`), CodeMissingField, `missing field "sdk_servers[0].tools[0].inputSchema"`},
		{"a tool name with a space", server("notes", `{"name":"se arch","inputSchema":{}}`), CodeInvalidField, `must be 1 to 128 of`},
		{"an unknown key of a tool", server("notes", `{"name":"search","inputSchema":{},"handler":"x"}`), CodeUnknownField, `unknown field "sdk_servers[0].tools[0].handler"`},
		{"a hint that is not a boolean", server("notes", `{"name":"search","inputSchema":{},"annotations":{"readOnlyHint":"yes"}}`), CodeInvalidField, `"sdk_servers[0].tools[0].annotations.readOnlyHint" must be a boolean`},
		{"keys of a server differing only in case", `{"type":"open_query","id":"2","sdk_servers":[{"name":"a","Name":"b","tools":[]}]}`, CodeDuplicateKey, `differ only in case in field "sdk_servers[0]"`},
		{"a server that is not an object", `{"type":"open_query","id":"2","sdk_servers":["notes"]}`, CodeInvalidField, `"sdk_servers[0]" must be an object`},
		{"more servers than MaxSDKServers", `{"type":"open_query","id":"2","sdk_servers":[` + many(MaxSDKServers+1, `{"name":"a","tools":[]}`) + `]}`, CodeInvalidField, `declares 17 servers, at most 16`},
		{"more tools than MaxSDKTools", server("notes", many(MaxSDKTools+1, tool)), CodeInvalidField, `declares 257 tools, at most 256`},
		{"sdk_servers beside claude_code_session", strings.Replace(open, `"id":"2",`, `"id":"2","claude_code_session":"s1",`, 1), CodeInvalidField, `excludes "sdk_servers"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, e := Decode([]byte(tc.frame))
			if e == nil {
				t.Fatalf("Decode(%s) = %#v, want %s", tc.frame, got, tc.code)
			}
			if e.Code != tc.code || !strings.Contains(e.Message, tc.msg) {
				t.Errorf("Decode(%s) = %s: %s, want %s containing %q", tc.frame, e.Code, e.Message, tc.code, tc.msg)
			}
		})
	}
}
