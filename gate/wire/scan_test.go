package wire

import (
	"encoding/json"
	"testing"
)

func TestScannerAgreesWithEncodingJSON(t *testing.T) {
	t.Parallel()
	// Each value is put into tool_input of a valid decide frame; Decode
	// must call the frame malformed exactly when encoding/json finds it
	// invalid.
	values := []string{
		`1`, `-0`, `-`, `--1`, `+1`, `1.`, `.5`, `1.5`, `1e`, `1e+`, `1E-5`, `1e05`, `01`, `-01`, `0.0e0`, `0x10`, `1_000`,
		`true`, `tru`, `truee`, `false`, `fals`, `null`, `nul`, `NULL`, `Infinity`,
		`""`, `"\u00zz"`, `"\u00e9"`, `"\uD83D\uDE00"`, `"\/"`, `"\a"`, `"\'"`, `"a` + "\x7f" + `"`, "\"\x1f\"", "\"\t\"", `"unterminated`, `"\"`,
		`[]`, `[1,]`, `[,1]`, `[1 2]`, ` [ 1 , 2 ] `, `[[[]]]`, `[[]`, `[]]`,
		`{}`, `{"a"}`, `{"a":}`, `{,"a":1}`, `{"a":1,}`, `{"a" : 1 , "b" : [ ] }`, `{1:2}`, `{"a":1 "b":2}`,
		"\v1", "\f1", "\u00a01", "1\r\n",
	}
	for _, v := range values {
		t.Run(v, func(t *testing.T) {
			t.Parallel()
			data := []byte(frame(validDecide, kv{"tool_input", `{"x":` + v + `}`}))
			_, e := Decode(data)
			malformed := e != nil && e.Code == CodeMalformedFrame
			if want := !json.Valid(data); malformed != want {
				t.Errorf("Decode(%s) malformed = %v (%v), encoding/json says invalid = %v", data, malformed, e, want)
			}
		})
	}
}
