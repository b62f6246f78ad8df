package gate

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/open-policy-agent/opa/v1/ast"
)

// viaEncodingJSON is how the sidecar read a tool_input before
// parseToolInput: encoding/json into maps (numbers kept as written), then
// ast.InterfaceToValue. parseToolInput must produce the same value for
// every object it accepts.
func viaEncodingJSON(raw []byte) (ast.Value, bool) {
	var m map[string]any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&m); err != nil || m == nil {
		return nil, false
	}
	if dec.InputOffset() != int64(len(bytes.TrimRight(raw, " \t\r\n"))) {
		return nil, false // data after the object: parseToolInput refuses it
	}
	v, err := ast.InterfaceToValue(m)
	if err != nil {
		return nil, false
	}
	return v, true
}

func checkToolInput(t *testing.T, raw []byte) {
	t.Helper()
	want, wantOK := viaEncodingJSON(raw)
	got, err := parseToolInput(raw)
	switch {
	case wantOK && err != nil:
		t.Fatalf("parseToolInput(%q) = %v; encoding/json read %v", raw, err, want)
	case !wantOK && err == nil:
		t.Fatalf("parseToolInput(%q) = %v; encoding/json refuses it", raw, got)
	case wantOK && got.Compare(want) != 0:
		t.Fatalf("parseToolInput(%q) = %v; encoding/json read %v", raw, got, want)
	}
}

// toolInputCases are inputs whose reading could differ: escapes, invalid
// UTF-8, surrogates, numbers as written, repeated keys, nesting, bad JSON.
var toolInputCases = []string{
	`{}`,
	` {"file_path": "/ws/a.txt"} `,
	`{"a":"plain","b":"tab\tescaped","c":"\u00e9\u0000","d":"\ud83d\ude00","e":"\ud800 lone","f":"\/slash"}`,
	"{\"raw\":\"é and \xff\xfe invalid\"}",
	"{\"k\xff\":1}",
	`{"n":[0,-0,1.50,1e3,-2E-7,12345678901234567890123]}`,
	`{"a":1,"a":2}`,
	`{"a":{"b":[{"c":null,"d":true,"e":false}]}}`,
	`{"a":[]}`,
	`{"a":"unterminated}`,
	`{"a":01}`,
	`{"a":1.}`,
	`{"a":.5}`,
	`{"a":+1}`,
	`{"a":tru}`,
	`{"a":1,}`,
	`{"a" 1}`,
	`{"a":1}{"b":2}`,
	`{"a":1} x`,
	`[1,2]`,
	`null`,
	`"s"`,
	"{\"a\":\"ctl\x01\"}",
	`{"a":"\x"}`,
	`{"a":"\u12"}`,
	"\ufeff{}",
	`{"deep":` + strings.Repeat(`[`, 200) + strings.Repeat(`]`, 200) + `}`,
}

func TestParseToolInputReadsWhatEncodingJSONRead(t *testing.T) {
	t.Parallel()
	for _, raw := range toolInputCases {
		checkToolInput(t, []byte(raw))
	}
}

func FuzzParseToolInput(f *testing.F) {
	for _, raw := range toolInputCases {
		f.Add([]byte(raw))
	}
	f.Fuzz(checkToolInput)
}

// BenchmarkParseToolInput reads a typical tool_input (a Bash call's) and a
// Write of 64 KiB of text, as the decision path does once per call.
func BenchmarkParseToolInput(b *testing.B) {
	for _, bc := range []struct{ name, raw string }{
		{"typical", `{"command":"grep -rn \"TODO\" src/ | head -n 20","description":"Find TODO comments","timeout":120000}`},
		{"large write", `{"file_path":"/srv/app/out.txt","content":"` + strings.Repeat(`line of text with \"quotes\" and \\ backslashes\n`, 64<<10/50) + `"}`},
		{"nested", `{"edits":[` + strings.Repeat(`{"old_string":"a","new_string":"b","replace_all":false,"n":[1,2.5,-3e2]},`, 99) + `{}]}`},
	} {
		b.Run(bc.name, func(b *testing.B) {
			raw := []byte(bc.raw)
			if _, err := parseToolInput(raw); err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(len(raw)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = parseToolInput(raw)
			}
		})
	}
}
