package wire

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// kv is one member of a test frame: a key and its raw JSON value.
type kv struct{ k, v string }

// Valid frames of every type, as in docs/protocol.md; read-only.
var (
	validHello      = []kv{{"type", `"hello"`}, {"id", `"1"`}, {"v", `1`}, {"client", `"my-agent/0.1"`}}
	validOpenQuery  = []kv{{"type", `"open_query"`}, {"id", `"2"`}, {"sandbox_policy", `{"proc":{"timeout":"30s","memory":"512m"}}`}}
	validDecide     = []kv{{"type", `"decide"`}, {"id", `"3"`}, {"query_id", `"q_6b0c"`}, {"event", `"PreToolUse"`}, {"tool_name", `"Read"`}, {"tool_input", `{"file_path":"/srv/app/notes.txt"}`}, {"tool_use_id", `"toolu_01"`}}
	validRun        = []kv{{"type", `"run"`}, {"id", `"4"`}, {"query_id", `"q_6b0c"`}, {"tool_use_id", `"toolu_02"`}, {"language", `"python"`}, {"code", `"print('hello')"`}, {"files", `{"data/in.csv":"a,b\n1,2\n"}`}, {"timeout_ms", `5000`}}
	validCloseQuery = []kv{{"type", `"close_query"`}, {"id", `"5"`}, {"query_id", `"q_6b0c"`}}
)

// frame writes base as a JSON object after applying edits: an edit with an
// empty value deletes its key, one with a key already in base replaces that
// member's value in place, any other is appended.
func frame(base []kv, edits ...kv) string {
	members := append([]kv(nil), base...)
	for _, e := range edits {
		i := 0
		for i < len(members) && members[i].k != e.k {
			i++
		}
		switch {
		case i == len(members):
			members = append(members, e)
		case e.v == "":
			members = append(members[:i], members[i+1:]...)
		default:
			members[i].v = e.v
		}
	}
	parts := make([]string, len(members))
	for i, m := range members {
		parts[i] = strconv.Quote(m.k) + ":" + m.v
	}
	return "{" + strings.Join(parts, ",") + "}"
}

// del is an edit deleting key.
func del(key string) kv { return kv{key, ""} }

// nested returns depth levels of arrays around 0.
func nested(depth int) string {
	return strings.Repeat("[", depth) + "0" + strings.Repeat("]", depth)
}

func int64p(n int64) *int64 { return &n }

// acceptCase is a frame Decode accepts and the request it decodes to.
type acceptCase struct {
	name  string
	frame string
	want  Request
}

// acceptCases are the frames Decode accepts.
func acceptCases() []acceptCase {
	return []acceptCase{
		{
			name:  "the hello of protocol.md is accepted",
			frame: frame(validHello),
			want:  &Hello{ID: "1", V: 1, Client: "my-agent/0.1"},
		},
		{
			name:  "a hello without client is accepted",
			frame: frame(validHello, del("client")),
			want:  &Hello{ID: "1", V: 1},
		},
		{
			name:  "a client of 256 characters is accepted",
			frame: frame(validHello, kv{"client", strconv.Quote(strings.Repeat("é", MaxClientChars))}),
			want:  &Hello{ID: "1", V: 1, Client: strings.Repeat("é", MaxClientChars)},
		},
		{
			name:  "the open_query of protocol.md keeps sandbox_policy exactly as sent",
			frame: frame(validOpenQuery, kv{"sandbox_policy", `{ "proc" : {"timeout":"30s", "memory":"512m"} }`}),
			want:  &OpenQuery{ID: "2", SandboxPolicy: json.RawMessage(`{ "proc" : {"timeout":"30s", "memory":"512m"} }`)},
		},
		{
			name:  "an open_query without sandbox_policy has a nil SandboxPolicy",
			frame: frame(validOpenQuery, del("sandbox_policy")),
			want:  &OpenQuery{ID: "2"},
		},
		{
			name:  "the decide of protocol.md is accepted",
			frame: frame(validDecide),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Read", ToolInput: json.RawMessage(`{"file_path":"/srv/app/notes.txt"}`), ToolUseID: "toolu_01"},
		},
		{
			name:  "a decide with mcp_server is accepted",
			frame: frame(validDecide, kv{"tool_name", `"mcp__fs__read"`}, kv{"mcp_server", `{"name":"fs","source":"stdio"}`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "mcp__fs__read", ToolInput: json.RawMessage(`{"file_path":"/srv/app/notes.txt"}`), ToolUseID: "toolu_01", MCPServer: &MCPServer{Name: "fs", Source: "stdio"}},
		},
		{
			name:  "a canUseTool decide may have an empty tool_use_id",
			frame: frame(validDecide, kv{"event", `"canUseTool"`}, kv{"tool_use_id", `""`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "canUseTool", ToolName: "Read", ToolInput: json.RawMessage(`{"file_path":"/srv/app/notes.txt"}`)},
		},
		{
			name:  "keys of tool_input that differ only in case are distinct keys",
			frame: frame(validDecide, kv{"tool_input", `{"path":"/a","Path":"/b","PATH":{"path":1,"Path":2}}`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Read", ToolInput: json.RawMessage(`{"path":"/a","Path":"/b","PATH":{"path":1,"Path":2}}`), ToolUseID: "toolu_01"},
		},
		{
			name:  "NUL and zero-width characters are passed through unchanged",
			frame: frame(validDecide, kv{"tool_name", `"Re\u200bad\u0000"`}, kv{"tool_input", `{"file_path":"/etc/passwd\u0000.txt","x":"a` + "\u200b" + `b"}`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Re\u200bad\x00", ToolInput: json.RawMessage(`{"file_path":"/etc/passwd\u0000.txt","x":"a` + "\u200b" + `b"}`), ToolUseID: "toolu_01"},
		},
		{
			name:  "escaped strings are decoded",
			frame: frame(validDecide, kv{"id", `"\u0033"`}, kv{"tool_name", `"R\u0065ad\n\"\\\/"`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Read\n\"\\/", ToolInput: json.RawMessage(`{"file_path":"/srv/app/notes.txt"}`), ToolUseID: "toolu_01"},
		},
		{
			name:  "a lone surrogate escape decodes to U+FFFD",
			frame: frame(validDecide, kv{"tool_name", `"Read\ud800"`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Read\ufffd", ToolInput: json.RawMessage(`{"file_path":"/srv/app/notes.txt"}`), ToolUseID: "toolu_01"},
		},
		{
			name:  "escaped keys are matched by their decoded name",
			frame: `{"typ\u0065":"close_query","\u0069d":"5","query_id":"q"}`,
			want:  &CloseQuery{ID: "5", QueryID: "q"},
		},
		{
			name:  "white space around and inside the frame is allowed",
			frame: " \r\n\t{ \"type\" : \"close_query\" ,\n\"id\":\"5\", \"query_id\" :\t\"q\" }\n ",
			want:  &CloseQuery{ID: "5", QueryID: "q"},
		},
		{
			name:  "keys may come in any order",
			frame: `{"query_id":"q","id":"5","type":"close_query"}`,
			want:  &CloseQuery{ID: "5", QueryID: "q"},
		},
		{
			name:  "an id of 128 multi-byte characters is accepted",
			frame: frame(validCloseQuery, kv{"id", strconv.Quote(strings.Repeat("ü", MaxIDChars))}),
			want:  &CloseQuery{ID: strings.Repeat("ü", MaxIDChars), QueryID: "q_6b0c"},
		},
		{
			name:  "tool_input nested to the depth limit is accepted",
			frame: frame(validDecide, kv{"tool_input", `{"a":` + nested(MaxDepth-2) + `}`}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Read", ToolInput: json.RawMessage(`{"a":` + nested(MaxDepth-2) + `}`), ToolUseID: "toolu_01"},
		},
		{
			name:  "an object with many keys is checked and accepted",
			frame: frame(validDecide, kv{"tool_input", manyKeys(100, "")}),
			want:  &Decide{ID: "3", QueryID: "q_6b0c", Event: "PreToolUse", ToolName: "Read", ToolInput: json.RawMessage(manyKeys(100, "")), ToolUseID: "toolu_01"},
		},
		{
			name:  "the run of protocol.md is accepted",
			frame: frame(validRun),
			want:  &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "python", Code: "print('hello')", Files: textFiles(map[string]string{"data/in.csv": "a,b\n1,2\n"}), TimeoutMS: int64p(5000)},
		},
		{
			name:  "a run without files and timeout_ms is accepted",
			frame: frame(validRun, del("files"), del("timeout_ms"), kv{"language", `"sh"`}, kv{"code", `""`}),
			want:  &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "sh"},
		},
		{
			name:  "an empty files object decodes to nil",
			frame: frame(validRun, kv{"files", `{}`}),
			want:  &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "python", Code: "print('hello')", TimeoutMS: int64p(5000)},
		},
		{
			name:  "paths in files that differ only in case are distinct",
			frame: frame(validRun, kv{"files", `{"a.txt":"1","A.txt":"2","\u0061.TXT":"3"}`}),
			want:  &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "python", Code: "print('hello')", Files: textFiles(map[string]string{"a.txt": "1", "A.txt": "2", "a.TXT": "3"}), TimeoutMS: int64p(5000)},
		},
		{
			name:  "a binary file in base64 and named outputs are accepted",
			frame: frame(validRun, kv{"files", `{"img.png":{"base64":"iVBORw0KGgo="},"t.txt":"x"}`}, kv{"outputs", `["out", "chart.png", "."]`}),
			want: &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "python", Code: "print('hello')", TimeoutMS: int64p(5000),
				Files: map[string]FileContent{"img.png": {Data: "\x89PNG\r\n\x1a\n", Base64: true}, "t.txt": {Data: "x"}}, Outputs: []string{"out", "chart.png", "."}},
		},
		{
			name:  "empty outputs are kept apart from absent ones",
			frame: frame(validRun, kv{"outputs", `[]`}),
			want:  &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "python", Code: "print('hello')", Files: textFiles(map[string]string{"data/in.csv": "a,b\n1,2\n"}), TimeoutMS: int64p(5000), Outputs: []string{}},
		},
		{
			name:  "to_agent paths, directories and patterns are accepted",
			frame: frame(validRun, kv{"to_agent", `["report.csv", "out/", "charts/*.png"]`}),
			want: &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "python", Code: "print('hello')", Files: textFiles(map[string]string{"data/in.csv": "a,b\n1,2\n"}), TimeoutMS: int64p(5000),
				ToAgent: []string{"report.csv", "out/", "charts/*.png"}},
		},
		{
			name:  "the largest timeout_ms is accepted",
			frame: frame(validRun, kv{"timeout_ms", strconv.FormatInt(math.MaxInt64, 10)}, kv{"language", `"node"`}),
			want:  &Run{ID: "4", QueryID: "q_6b0c", ToolUseID: "toolu_02", Language: "node", Code: "print('hello')", Files: textFiles(map[string]string{"data/in.csv": "a,b\n1,2\n"}), TimeoutMS: int64p(math.MaxInt64)},
		},
		{
			name:  "the close_query of protocol.md is accepted",
			frame: frame(validCloseQuery),
			want:  &CloseQuery{ID: "5", QueryID: "q_6b0c"},
		},
	}
}

func TestDecodeAccepts(t *testing.T) {
	t.Parallel()
	for _, tc := range acceptCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, e := Decode([]byte(tc.frame))
			if e != nil {
				t.Fatalf("Decode(%s) = error frame %+v, want %#v", tc.frame, e, tc.want)
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("Decode(%s) = %#v, want %#v", tc.frame, got, tc.want)
			}
			if got.RequestID() != tc.want.RequestID() || got.Type() != tc.want.Type() {
				t.Errorf("Decode(%s) has id %q and type %q, want %q and %q", tc.frame, got.RequestID(), got.Type(), tc.want.RequestID(), tc.want.Type())
			}
		})
	}
}

// manyKeys returns an object with n keys k0, k1, …, then extra.
func manyKeys(n int, extra string) string {
	var b strings.Builder
	b.WriteByte('{')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k` + strconv.Itoa(i) + `":` + strconv.Itoa(i))
	}
	b.WriteString(extra)
	b.WriteByte('}')
	return b.String()
}

// refuseCase is a frame Decode refuses and the error frame's code and id.
type refuseCase struct {
	name   string
	frame  string
	code   string
	id     string
	golden bool // the error frame gets a golden file
}

// refuseCases are the frames Decode refuses, by error class.
func refuseCases() []refuseCase {
	return []refuseCase{
		// malformed_frame
		{name: "text that is not JSON is malformed", frame: `hello`, code: CodeMalformedFrame, golden: true},
		{name: "an empty frame is malformed", frame: ``, code: CodeMalformedFrame},
		{name: "a frame of white space is malformed", frame: " \n", code: CodeMalformedFrame},
		{name: "an array instead of an object is malformed", frame: `[` + frame(validHello) + `]`, code: CodeMalformedFrame, golden: true},
		{name: "a string instead of an object is malformed", frame: `"hello"`, code: CodeMalformedFrame},
		{name: "null instead of an object is malformed", frame: `null`, code: CodeMalformedFrame},
		{name: "a truncated frame is malformed and echoes the id read so far", frame: `{"type":"hello","id":"1","v":`, code: CodeMalformedFrame, id: "1", golden: true},
		{name: "a frame cut inside the id echoes no id", frame: `{"type":"hello","id":"1`, code: CodeMalformedFrame},
		{name: "trailing data after the object is malformed", frame: frame(validHello) + ` x`, code: CodeMalformedFrame, id: "1", golden: true},
		{name: "a second object after the first is malformed", frame: frame(validHello) + frame(validHello), code: CodeMalformedFrame, id: "1"},
		{name: "invalid UTF-8 is malformed", frame: `{"type":"hello","id":"1","client":"` + "\xff\xfe" + `","v":1}`, code: CodeMalformedFrame, golden: true},
		{name: "a raw control character in a string is malformed", frame: "{\"type\":\"hello\",\"id\":\"1\",\"client\":\"a\tb\",\"v\":1}", code: CodeMalformedFrame, id: "1"},
		{name: "an invalid escape is malformed", frame: `{"type":"hello","id":"1","client":"\x41","v":1}`, code: CodeMalformedFrame, id: "1"},
		{name: "a short unicode escape is malformed", frame: `{"type":"hello","id":"1","client":"\u41","v":1}`, code: CodeMalformedFrame, id: "1"},
		{name: "a leading byte order mark is malformed", frame: "\ufeff" + frame(validHello), code: CodeMalformedFrame},
		{name: "a trailing comma is malformed", frame: `{"type":"hello","id":"1","v":1,}`, code: CodeMalformedFrame, id: "1"},
		{name: "a number with a leading zero is malformed", frame: frame(validDecide, kv{"tool_input", `{"n":01}`}), code: CodeMalformedFrame, id: "3"},
		{name: "a number without digits after the point is malformed", frame: frame(validDecide, kv{"tool_input", `{"n":1.}`}), code: CodeMalformedFrame, id: "3"},
		{name: "NaN is malformed", frame: frame(validDecide, kv{"tool_input", `{"n":NaN}`}), code: CodeMalformedFrame, id: "3"},
		{name: "single quotes are malformed", frame: `{'type':'hello'}`, code: CodeMalformedFrame},
		{name: "a misspelt literal is malformed", frame: frame(validDecide, kv{"tool_input", `{"n":nul}`}), code: CodeMalformedFrame, id: "3"},
		{name: "a missing colon is malformed", frame: `{"type" "hello"}`, code: CodeMalformedFrame},
		{name: "an unclosed array is malformed", frame: frame(validDecide, kv{"tool_input", `{"n":[1,2}`}), code: CodeMalformedFrame, id: "3"},
		{name: "a malformed frame is malformed even with a repeated key first", frame: `{"id":"1","a":1,"a":2`, code: CodeMalformedFrame, id: "1"},
		{name: "a very deep truncated frame is malformed", frame: `{"type":"decide","id":"3","tool_input":` + strings.Repeat(`[`, 100000), code: CodeMalformedFrame, id: "3"},

		// duplicate_key
		{name: "a repeated top-level key is refused", frame: strings.Replace(frame(validDecide), `"tool_use_id"`, `"tool_name":"Bash","tool_use_id"`, 1), code: CodeDuplicateKey, id: "3", golden: true},
		{name: "top-level keys differing only in case are refused", frame: strings.Replace(frame(validDecide), `"tool_use_id"`, `"Tool_Name":"Bash","tool_use_id"`, 1), code: CodeDuplicateKey, id: "3", golden: true},
		{name: "a Type key beside type is refused", frame: frame(validDecide, kv{"Type", `"hello"`}), code: CodeDuplicateKey, id: "3", golden: true},
		{name: "two ids are refused and neither is echoed", frame: frame(validCloseQuery, kv{"ID", `"6"`}), code: CodeDuplicateKey, golden: true},
		{name: "keys equal under Unicode case folding are refused", frame: frame(validDecide, kv{"tool_\u212Aey", `1`}, kv{"tool_key", `2`}), code: CodeDuplicateKey, id: "3"},
		{name: "a key repeated through an escape is refused", frame: `{"type":"close_query","id":"5","query_id":"q","quer\u0079_id":"q2"}`, code: CodeDuplicateKey, id: "5"},
		{name: "a repeated key inside tool_input is refused", frame: frame(validDecide, kv{"tool_input", `{"file_path":"/srv/app/notes.txt","file_path":"/etc/shadow"}`}), code: CodeDuplicateKey, id: "3", golden: true},
		{name: "a repeated key deep inside tool_input is refused", frame: frame(validDecide, kv{"tool_input", `{"a":[{"b":{"c":1,"d":[],"c":2}}]}`}), code: CodeDuplicateKey, id: "3", golden: true},
		{name: "a key repeated through an escape inside tool_input is refused", frame: frame(validDecide, kv{"tool_input", `{"cmd":"ls","\u0063md":"rm -rf /"}`}), code: CodeDuplicateKey, id: "3"},
		{name: "a repeated key among many keys of tool_input is refused", frame: frame(validDecide, kv{"tool_input", manyKeys(100, `,"k57":0`)}), code: CodeDuplicateKey, id: "3"},
		{name: "case variants among many top-level keys are refused", frame: manyKeys(2*smallObject, `,"type":"decide","id":"3","K7":1`), code: CodeDuplicateKey, id: "3"},
		{name: "a repeated path in files is refused", frame: frame(validRun, kv{"files", `{"a.txt":"1","a.txt":"2"}`}), code: CodeDuplicateKey, id: "4", golden: true},
		{name: "keys of mcp_server differing only in case are refused", frame: frame(validDecide, kv{"mcp_server", `{"name":"fs","source":"sdk","Source":"stdio"}`}), code: CodeDuplicateKey, id: "3", golden: true},
		{name: "a repeated key inside sandbox_policy is refused", frame: frame(validOpenQuery, kv{"sandbox_policy", `{"proc":{"memory":"1g","memory":"64g"}}`}), code: CodeDuplicateKey, id: "2", golden: true},
		{name: "a repeated key comes before an unknown type", frame: `{"type":"nope","id":"1","x":1,"x":2}`, code: CodeDuplicateKey, id: "1"},

		// type
		{name: "a frame without type is refused", frame: frame(validHello, del("type")), code: CodeMissingField, id: "1", golden: true},
		{name: "a frame with Type but no type is refused", frame: `{"Type":"decide","id":"3"}`, code: CodeMissingField, id: "3", golden: true},
		{name: "a type that is not a string is refused", frame: frame(validHello, kv{"type", `1`}), code: CodeInvalidField, id: "1", golden: true},
		{name: "a null type is refused", frame: frame(validHello, kv{"type", `null`}), code: CodeInvalidField, id: "1"},
		{name: "an unknown type is refused", frame: frame(validHello, kv{"type", `"goodbye"`}), code: CodeUnknownType, id: "1", golden: true},
		{name: "a reply type sent as a request is refused", frame: frame(validHello, kv{"type", `"decision"`}), code: CodeUnknownType, id: "1"},
		{name: "a type in the wrong case is refused", frame: frame(validHello, kv{"type", `"Hello"`}), code: CodeUnknownType, id: "1"},

		// unknown_field
		{name: "an unknown field of decide is refused", frame: frame(validDecide, kv{"toolname", `"Bash"`}), code: CodeUnknownField, id: "3", golden: true},
		{name: "a field in the wrong case is refused as unknown", frame: frame(validHello, del("v"), kv{"V", `1`}), code: CodeUnknownField, id: "1", golden: true},
		{name: "a field of another frame type is refused", frame: frame(validHello, kv{"query_id", `"q"`}), code: CodeUnknownField, id: "1"},
		{name: "an unknown field comes before a missing field", frame: frame(validCloseQuery, del("query_id"), kv{"queryId", `"q"`}), code: CodeUnknownField, id: "5"},
		{name: "an unknown field in mcp_server is refused", frame: frame(validDecide, kv{"mcp_server", `{"name":"fs","source":"sdk","trusted":true}`}), code: CodeUnknownField, id: "3", golden: true},
		{name: "an unknown field nested too deep is refused as unknown", frame: frame(validDecide, kv{"extra", nested(MaxDepth)}), code: CodeUnknownField, id: "3"},

		// missing_field
		{name: "a hello without id is refused", frame: frame(validHello, del("id")), code: CodeMissingField, golden: true},
		{name: "a hello without v is refused", frame: frame(validHello, del("v")), code: CodeMissingField, id: "1", golden: true},
		{name: "an open_query without id is refused", frame: frame(validOpenQuery, del("id")), code: CodeMissingField},
		{name: "a decide without query_id is refused", frame: frame(validDecide, del("query_id")), code: CodeMissingField, id: "3"},
		{name: "a decide without event is refused", frame: frame(validDecide, del("event")), code: CodeMissingField, id: "3"},
		{name: "a decide without tool_name is refused", frame: frame(validDecide, del("tool_name")), code: CodeMissingField, id: "3"},
		{name: "a decide without tool_input is refused", frame: frame(validDecide, del("tool_input")), code: CodeMissingField, id: "3", golden: true},
		{name: "a decide without tool_use_id is refused", frame: frame(validDecide, del("tool_use_id")), code: CodeMissingField, id: "3", golden: true},
		{name: "an mcp_server without source is refused", frame: frame(validDecide, kv{"mcp_server", `{"name":"fs"}`}), code: CodeMissingField, id: "3", golden: true},
		{name: "a run without query_id is refused", frame: frame(validRun, del("query_id")), code: CodeMissingField, id: "4"},
		{name: "a run without tool_use_id is refused", frame: frame(validRun, del("tool_use_id")), code: CodeMissingField, id: "4"},
		{name: "a run without language is refused", frame: frame(validRun, del("language")), code: CodeMissingField, id: "4", golden: true},
		{name: "a run without code is refused", frame: frame(validRun, del("code")), code: CodeMissingField, id: "4"},
		{name: "a close_query without query_id is refused", frame: frame(validCloseQuery, del("query_id")), code: CodeMissingField, id: "5", golden: true},

		// invalid_field
		{name: "a number id is refused", frame: frame(validHello, kv{"id", `1`}), code: CodeInvalidField, golden: true},
		{name: "a null id is refused", frame: frame(validHello, kv{"id", `null`}), code: CodeInvalidField},
		{name: "an empty id is refused", frame: frame(validHello, kv{"id", `""`}), code: CodeInvalidField, golden: true},
		{name: "an id of 129 characters is refused and still echoed", frame: frame(validHello, kv{"id", strconv.Quote(strings.Repeat("x", MaxIDChars+1))}), code: CodeInvalidField, id: strings.Repeat("x", MaxIDChars+1), golden: true},
		{name: "a string v is refused", frame: frame(validHello, kv{"v", `"1"`}), code: CodeInvalidField, id: "1", golden: true},
		{name: "a fractional v is refused", frame: frame(validHello, kv{"v", `1.0`}), code: CodeInvalidField, id: "1"},
		{name: "an exponent v is refused", frame: frame(validHello, kv{"v", `1e0`}), code: CodeInvalidField, id: "1"},
		{name: "a null v is refused", frame: frame(validHello, kv{"v", `null`}), code: CodeInvalidField, id: "1"},
		{name: "a client of 257 characters is refused", frame: frame(validHello, kv{"client", strconv.Quote(strings.Repeat("c", MaxClientChars+1))}), code: CodeInvalidField, id: "1", golden: true},
		{name: "a null client is refused", frame: frame(validHello, kv{"client", `null`}), code: CodeInvalidField, id: "1"},
		{name: "a null sandbox_policy is refused", frame: frame(validOpenQuery, kv{"sandbox_policy", `null`}), code: CodeInvalidField, id: "2", golden: true},
		{name: "a sandbox_policy that is not an object is refused", frame: frame(validOpenQuery, kv{"sandbox_policy", `"proc: {}"`}), code: CodeInvalidField, id: "2"},
		{name: "a sandbox_policy nested too deep is refused", frame: frame(validOpenQuery, kv{"sandbox_policy", `{"a":` + nested(MaxDepth-1) + `}`}), code: CodeInvalidField, id: "2"},
		{name: "an empty query_id is refused", frame: frame(validDecide, kv{"query_id", `""`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "a number query_id is refused", frame: frame(validCloseQuery, kv{"query_id", `7`}), code: CodeInvalidField, id: "5"},
		{name: "an unknown event is refused", frame: frame(validDecide, kv{"event", `"PostToolUse"`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "an event in the wrong case is refused", frame: frame(validDecide, kv{"event", `"pretooluse"`}), code: CodeInvalidField, id: "3"},
		{name: "an empty tool_name is refused", frame: frame(validDecide, kv{"tool_name", `""`}), code: CodeInvalidField, id: "3"},
		{name: "a tool_input that is an array is refused", frame: frame(validDecide, kv{"tool_input", `[{"file_path":"/etc/shadow"}]`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "a tool_input that is a string is refused", frame: frame(validDecide, kv{"tool_input", `"{}"`}), code: CodeInvalidField, id: "3"},
		{name: "a null tool_input is refused", frame: frame(validDecide, kv{"tool_input", `null`}), code: CodeInvalidField, id: "3"},
		{name: "a tool_input nested one level too deep is refused", frame: frame(validDecide, kv{"tool_input", `{"a":` + nested(MaxDepth-1) + `}`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "a tool_input nested a hundred thousand levels deep is refused", frame: frame(validDecide, kv{"tool_input", `{"a":` + nested(100000) + `}`}), code: CodeInvalidField, id: "3"},
		{name: "an empty tool_use_id for PreToolUse is refused", frame: frame(validDecide, kv{"tool_use_id", `""`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "a null tool_use_id is refused", frame: frame(validDecide, kv{"tool_use_id", `null`}), code: CodeInvalidField, id: "3"},
		{name: "a null mcp_server is refused", frame: frame(validDecide, kv{"mcp_server", `null`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "an mcp_server that is a string is refused", frame: frame(validDecide, kv{"mcp_server", `"fs"`}), code: CodeInvalidField, id: "3"},
		{name: "an unknown mcp_server source is refused", frame: frame(validDecide, kv{"mcp_server", `{"name":"fs","source":"local"}`}), code: CodeInvalidField, id: "3", golden: true},
		{name: "an empty mcp_server name is refused", frame: frame(validDecide, kv{"mcp_server", `{"name":"","source":"sdk"}`}), code: CodeInvalidField, id: "3"},
		{name: "an unknown language is refused", frame: frame(validRun, kv{"language", `"python3"`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "a null code is refused", frame: frame(validRun, kv{"code", `null`}), code: CodeInvalidField, id: "4"},
		{name: "files that is an array is refused", frame: frame(validRun, kv{"files", `[["a.txt","1"]]`}), code: CodeInvalidField, id: "4"},
		{name: "a null file content is refused", frame: frame(validRun, kv{"files", `{"a.txt":null}`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "a number file content is refused", frame: frame(validRun, kv{"files", `{"a.txt":"1","b.txt":2}`}), code: CodeInvalidField, id: "4"},
		{name: "a file in bad base64 is refused", frame: frame(validRun, kv{"files", `{"a.bin":{"base64":"not base64!"}}`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "a file in base64 without padding is refused", frame: frame(validRun, kv{"files", `{"a.bin":{"base64":"iVBORw0KGgo"}}`}), code: CodeInvalidField, id: "4"},
		{name: "a file object with another key is refused", frame: frame(validRun, kv{"files", `{"a.bin":{"base64":"AA==","mode":"0755"}}`}), code: CodeInvalidField, id: "4"},
		{name: "a file object without base64 is refused", frame: frame(validRun, kv{"files", `{"a.bin":{"text":"x"}}`}), code: CodeInvalidField, id: "4"},
		{name: "outputs that are a string are refused", frame: frame(validRun, kv{"outputs", `"out"`}), code: CodeInvalidField, id: "4"},
		{name: "a null in outputs is refused", frame: frame(validRun, kv{"outputs", `["out",null]`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "a to_agent pattern that path.Match cannot read is refused", frame: frame(validRun, kv{"to_agent", `["ok.csv","out/[a-"]`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "an empty to_agent path is refused", frame: frame(validRun, kv{"to_agent", `[""]`}), code: CodeInvalidField, id: "4"},
		{name: "a null in to_agent is refused", frame: frame(validRun, kv{"to_agent", `["a",null]`}), code: CodeInvalidField, id: "4"},
		{name: "to_agent naming too many paths is refused", frame: frame(validRun, kv{"to_agent", `[` + strings.Repeat(`"a",`, MaxOutputs) + `"a"]`}), code: CodeInvalidField, id: "4"},
		{name: "outputs naming too many paths are refused", frame: frame(validRun, kv{"outputs", `[` + strings.Repeat(`"a",`, MaxOutputs) + `"a"]`}), code: CodeInvalidField, id: "4"},
		{name: "a zero timeout_ms is refused", frame: frame(validRun, kv{"timeout_ms", `0`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "a negative timeout_ms is refused", frame: frame(validRun, kv{"timeout_ms", `-5000`}), code: CodeInvalidField, id: "4"},
		{name: "a fractional timeout_ms is refused", frame: frame(validRun, kv{"timeout_ms", `5000.5`}), code: CodeInvalidField, id: "4"},
		{name: "an exponent timeout_ms is refused", frame: frame(validRun, kv{"timeout_ms", `5e3`}), code: CodeInvalidField, id: "4"},
		{name: "a string timeout_ms is refused", frame: frame(validRun, kv{"timeout_ms", `"5000"`}), code: CodeInvalidField, id: "4"},
		{name: "a timeout_ms just past int64 is refused", frame: frame(validRun, kv{"timeout_ms", `9223372036854775808`}), code: CodeInvalidField, id: "4", golden: true},
		{name: "a timeout_ms of four hundred digits is refused", frame: frame(validRun, kv{"timeout_ms", "1" + strings.Repeat("0", 400)}), code: CodeInvalidField, id: "4"},

		// unsupported_version
		{name: "version 2 is unsupported", frame: frame(validHello, kv{"v", `2`}), code: CodeUnsupportedVersion, id: "1", golden: true},
		{name: "version 0 is unsupported", frame: frame(validHello, kv{"v", `0`}), code: CodeUnsupportedVersion, id: "1"},
		{name: "version minus 1 is unsupported", frame: frame(validHello, kv{"v", `-1`}), code: CodeUnsupportedVersion, id: "1"},
		{name: "a version of a hundred digits is unsupported", frame: frame(validHello, kv{"v", strings.Repeat("1", 100)}), code: CodeUnsupportedVersion, id: "1", golden: true},
	}
}

func TestDecodeRefuses(t *testing.T) {
	t.Parallel()
	for _, tc := range refuseCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			req, e := Decode([]byte(tc.frame))
			if e == nil {
				t.Fatalf("Decode(%.200s) = %#v, want an error frame with code %s", tc.frame, req, tc.code)
			}
			if req != nil {
				t.Errorf("Decode(%.200s) returned request %#v beside error %v", tc.frame, req, e)
			}
			if e.Code != tc.code || e.ID != tc.id {
				t.Errorf("Decode(%.200s) = error frame with code %s and id %.40q (%s), want code %s and id %.40q", tc.frame, e.Code, e.ID, e.Message, tc.code, tc.id)
			}
			if !strings.HasPrefix(e.Message, "frame: ") && !strings.HasPrefix(e.Message, typeOf(tc.frame)+": ") {
				t.Errorf("Decode(%.200s) message %q does not start with the frame type", tc.frame, e.Message)
			}
			if tc.golden {
				checkGolden(t, "refuse_"+slug(tc.name), refusalGolden(t, tc.frame, e))
			}
		})
	}
}

// typeOf guesses the type of a test frame from its text.
func typeOf(frame string) string {
	for _, typ := range []string{TypeHello, TypeOpenQuery, TypeDecide, TypeRun, TypeCloseQuery} {
		if strings.Contains(frame, `"type":"`+typ+`"`) {
			return typ
		}
	}
	return "frame"
}

// refusalGolden is the golden file of a refused frame: the input frame (as a
// JSON string, or Go-quoted when it is not valid UTF-8) and the error frame
// exactly as Encode writes it.
func refusalGolden(t *testing.T, frame string, e *Error) []byte {
	t.Helper()
	out, err := Encode(e)
	if err != nil {
		t.Fatalf("Encode(%+v): %v", e, err)
	}
	key, in := "input", frame
	if !utf8.ValidString(frame) {
		key, in = "input_go_quoted", strconv.Quote(frame)
	}
	inJSON, err := marshal(in)
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	b.WriteString("{\n  \"" + key + "\": ")
	b.Write(inJSON)
	b.WriteString(",\n  \"output\": ")
	b.Write(out)
	b.WriteString("\n}\n")
	return b.Bytes()
}

func TestDecodeDoesNotRetainTheFrame(t *testing.T) {
	t.Parallel()
	data := []byte(frame(validDecide))
	req, e := Decode(data)
	if e != nil {
		t.Fatal(e)
	}
	for i := range data {
		data[i] = 'x'
	}
	if d := req.(*Decide); string(d.ToolInput) != `{"file_path":"/srv/app/notes.txt"}` || d.ToolName != "Read" {
		t.Errorf("after overwriting the frame, Decode's result changed to %#v", d)
	}
}

func TestDecodeDecideCwd(t *testing.T) {
	t.Parallel()
	base := `{"type":"decide","id":"1","query_id":"q","event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t"`
	req, werr := Decode([]byte(base + `,"cwd":"/srv/app"}`))
	if werr != nil || req.(*Decide).Cwd != "/srv/app" {
		t.Fatalf("decode with cwd: %v %v", req, werr)
	}
	if _, werr := Decode([]byte(base + `,"cwd":"srv/app"}`)); werr == nil || werr.Code != CodeInvalidField {
		t.Fatalf("a relative cwd: %v", werr)
	}
}

// TestDecodeDecideAgent: a decide frame may name the subagent of the call,
// as the SDK's hook input does; the fields are bounded like ids.
func TestDecodeDecideAgent(t *testing.T) {
	t.Parallel()
	base := `{"type":"decide","id":"1","query_id":"q","event":"PreToolUse","tool_name":"Read","tool_input":{},"tool_use_id":"t"`
	req, werr := Decode([]byte(base + `,"agent_id":"a8f3","agent_type":"code-reviewer"}`))
	if werr != nil || req.(*Decide).AgentID != "a8f3" || req.(*Decide).AgentType != "code-reviewer" {
		t.Fatalf("decode with agent fields: %#v %v", req, werr)
	}
	for name, tail := range map[string]string{
		"an agent_id that is a number":         `,"agent_id":1}`,
		"an agent_type of 129 characters":      `,"agent_type":"` + strings.Repeat("x", 129) + `"}`,
		"an agent_id repeated in another case": `,"agent_id":"a","AGENT_ID":"b"}`,
	} {
		if _, werr := Decode([]byte(base + tail)); werr == nil {
			t.Errorf("%s: decoded", name)
		}
	}
}

// textFiles is files given as text.
func textFiles(m map[string]string) map[string]FileContent {
	out := make(map[string]FileContent, len(m))
	for k, v := range m {
		out[k] = FileContent{Data: v}
	}
	return out
}
