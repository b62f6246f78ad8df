package jsonlex_test

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/internal/jsonlex"
)

func TestTokens(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		read     func(d []byte) (int, error)
		end      int
		err      string
	}{
		{"a plain string ends after its quote", `"ab" x`, str, 4, ""},
		{"an escaped quote does not end a string", `"a\"b"`, str, 6, ""},
		{`a \u escape needs four hex digits`, `"\u12g4"`, str, 0, `invalid \u escape at byte 1`},
		{"an unknown escape is refused where its backslash is", `"ab\x"`, str, 0, `invalid escape \x at byte 3`},
		{"a control character is refused", "\"a\tb\"", str, 0, "control character in string at byte 2"},
		{"an unterminated string ends the input", `"abc`, str, 0, "unexpected end of input at byte 4"},
		{`a cut \u escape ends the input`, `"\u00`, str, 0, "unexpected end of input at byte 5"},
		{"a number stops at the first byte not its own", `-12.5e+3,`, num, 8, ""},
		{"zero has no leading digits after it", `01`, num, 1, ""},
		{"a fraction needs a digit", `1.e3`, num, 0, "invalid number at byte 0"},
		{"an exponent needs a digit", `1e+`, num, 0, "invalid number at byte 0"},
		{"a minus needs a digit", `-x`, num, 0, "invalid number at byte 0"},
		{"true is read whole", `true}`, lit("true"), 4, ""},
		{"a cut literal is refused", `nul`, lit("null"), 0, "invalid literal, want null at byte 0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			end, err := tt.read([]byte(tt.in))
			if got := errText(err); got != tt.err || err == nil && end != tt.end {
				t.Fatalf("read(%q) = %d, %q; want %d, %q", tt.in, end, got, tt.end, tt.err)
			}
		})
	}
}

func str(d []byte) (int, error) { end, _, err := jsonlex.String(d, 0); return end, err }
func num(d []byte) (int, error) { return jsonlex.Number(d, 0) }
func lit(l string) func([]byte) (int, error) {
	return func(d []byte) (int, error) { return jsonlex.Literal(d, 0, l) }
}

func errText(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// FuzzString pins String and Unquote to encoding/json: a literal String
// accepts is one json.Unmarshal accepts, escaped exactly when it holds a
// backslash, and Unquote decodes it to the same string (invalid UTF-8 and
// lone surrogates included).
func FuzzString(f *testing.F) {
	for _, s := range []string{`"a"`, `"\u00e9\ud83d\ude00"`, `"\ud800"`, "\"\xff\xfe\"", `"\x"`, "\"a\x01\"", `"\u12"`, `"é" `, `"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		if len(d) == 0 || d[0] != '"' {
			return
		}
		var want string
		wantOK := json.Unmarshal(d, &want) == nil
		end, escaped, err := jsonlex.String(d, 0)
		if ok := err == nil && jsonlex.Space(d, end) == len(d); ok != wantOK {
			t.Fatalf("String(%q) = %d, %v; json.Unmarshal accepts it: %v", d, end, err, wantOK)
		}
		if !wantOK {
			return
		}
		if escaped != bytes.Contains(d[1:end-1], []byte(`\`)) {
			t.Fatalf("String(%q) escaped = %v", d, escaped)
		}
		if got, err := jsonlex.Unquote(d[:end], escaped); err != nil || got != want {
			t.Fatalf("Unquote(%q) = %q, %v; json.Unmarshal read %q", d[:end], got, err, want)
		}
	})
}

// FuzzNumber pins Number's grammar to encoding/json's.
func FuzzNumber(f *testing.F) {
	for _, s := range []string{"0", "-0", "1.5e+3", "01", "1.", ".5", "-", "1e", "12345678901234567890", "1E-7 "} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, d []byte) {
		if len(d) == 0 || d[0] != '-' && (d[0] < '0' || d[0] > '9') {
			return
		}
		end, err := jsonlex.Number(d, 0)
		if ok := err == nil && jsonlex.Space(d, end) == len(d); ok != json.Valid(d) {
			t.Fatalf("Number(%q) = %d, %v; json.Valid is %v", d, end, err, json.Valid(d))
		}
	})
}
