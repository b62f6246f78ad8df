package untrusted

import (
	"bytes"
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gatekeeper-ai/gatekeeper/internal/goldenfile"
)

var update = flag.Bool("update", false, "rewrite testdata/unsafe.json from Unsafe")

// quoteCase is one line of testdata/quote.json, which ts-client's
// untrusted.test.ts reads too.
type quoteCase struct {
	Name     string `json:"name"`
	In       string `json:"in"`
	Quoted   string `json:"quoted"`
	Terminal string `json:"terminal"`
}

func readCases(t *testing.T) []quoteCase {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", "quote.json"))
	if err != nil {
		t.Fatal(err)
	}
	var cs []quoteCase
	if err := json.Unmarshal(data, &cs); err != nil {
		t.Fatal(err)
	}
	if len(cs) < 10 {
		t.Fatalf("testdata/quote.json has %d cases", len(cs))
	}
	return cs
}

func TestQuoteAndTerminalMatchTheSharedCases(t *testing.T) {
	t.Parallel()
	for _, c := range readCases(t) {
		if got := Quote(c.In); got != c.Quoted {
			t.Errorf("%s: Quote(%+q) = %+q, want %+q", c.Name, c.In, got, c.Quoted)
		}
		if got := Terminal(c.In); got != c.Terminal {
			t.Errorf("%s: Terminal(%+q) = %+q, want %+q", c.Name, c.In, got, c.Terminal)
		}
	}
}

// TestQuoteIsOneLineThatReadsBack checks what makes a quoted name safe in
// a line the model reads, for every case and for every unsafe character:
// no unsafe character is left, and the quoted text decodes as a JSON
// string back to the name.
func TestQuoteIsOneLineThatReadsBack(t *testing.T) {
	t.Parallel()
	ins := []string{strings.Join(unsafeRunes(), "")}
	for _, c := range readCases(t) {
		ins = append(ins, c.In)
	}
	for _, in := range ins {
		q := Quote(in)
		if strings.ContainsFunc(q, Unsafe) {
			t.Errorf("Quote(%+q) = %+q keeps an unsafe character", in, q)
		}
		var back string
		if err := json.Unmarshal([]byte(q), &back); err != nil || back != in {
			t.Errorf("Quote(%+q) = %+q reads back as %+q (%v)", in, q, back, err)
		}
		if tm := Terminal(in); strings.ContainsFunc(tm, Unsafe) {
			t.Errorf("Terminal(%+q) = %+q keeps an unsafe character", in, tm)
		}
	}
}

func unsafeRunes() []string {
	var out []string
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if Unsafe(r) {
			out = append(out, string(r))
		}
	}
	return out
}

// TestUnsafeIsTheSharedList pins Unsafe, over every code point, to
// testdata/unsafe.json, the ranges @gatekeeper/client's isUnsafe is
// checked against too.
func TestUnsafeIsTheSharedList(t *testing.T) {
	t.Parallel()
	var ranges [][2]rune
	for r := rune(0); r <= utf8.MaxRune; r++ {
		if !Unsafe(r) {
			continue
		}
		if n := len(ranges); n > 0 && ranges[n-1][1] == r-1 {
			ranges[n-1][1] = r
		} else {
			ranges = append(ranges, [2]rune{r, r})
		}
	}
	got, err := json.Marshal(ranges)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", "unsafe.json")
	if *update {
		goldenfile.Write(t, path, append(got, '\n'))
	} else {
		want, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != strings.TrimSpace(string(want)) {
			t.Errorf("Unsafe covers %s, testdata/unsafe.json says %s", got, want)
		}
	}
	// The classes the rule is written for are all in it.
	for _, r := range []rune{0, '\n', '\r', 0x1b, 0x7f, 0x85, 0x9b, 0x9c, 0x2028, 0x2029, 0x202e, 0x2066, 0x061c} {
		if !Unsafe(r) {
			t.Errorf("U+%04X is not unsafe", r)
		}
	}
	for _, r := range []rune{' ', 'a', '"', '\\', 0xa0, 0xfffd, 0x1f40d, 0x200b} {
		if Unsafe(r) {
			t.Errorf("U+%04X is unsafe", r)
		}
	}
}

func TestJSONEscapesWhatEncodersLeaveRaw(t *testing.T) {
	t.Parallel()
	v := map[string]string{"path": "a\x7fb\u0085c\u009b2J\u202ed\u2028e\n\x1b]0;x\x07"}
	var raw bytes.Buffer
	enc := json.NewEncoder(&raw)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		t.Fatal(err)
	}
	if !strings.ContainsFunc(raw.String(), Unsafe) {
		t.Fatalf("the encoder escaped everything already: %q; the test proves nothing", raw.String())
	}
	out := JSON(raw.Bytes())
	if strings.ContainsFunc(strings.TrimSuffix(string(out), "\n"), Unsafe) { // the encoder ends with a newline
		t.Errorf("JSON left an unsafe character: %q", out)
	}
	var back map[string]string
	if err := json.Unmarshal(out, &back); err != nil || back["path"] != v["path"] {
		t.Errorf("JSON changed the value: %q (%v)", back["path"], err)
	}
}

func TestTerminalWriterEscapesAcrossWrites(t *testing.T) {
	t.Parallel()
	in := "ok \x1b[2J\x1b]0;pwned\x07 é\u009b31m line\r\nnext\ttab \u2028 🐍 end"
	for split := 0; split <= len(in); split++ {
		var out bytes.Buffer
		w := NewTerminalWriter(&out)
		for _, part := range []string{in[:split], in[split:]} {
			if n, err := w.Write([]byte(part)); err != nil || n != len(part) {
				t.Fatalf("split %d: Write = %d, %v", split, n, err)
			}
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		if got, want := out.String(), TerminalText(in); got != want {
			t.Fatalf("split at %d: %q, want %q", split, got, want)
		}
	}
	if got, want := TerminalText(in), `ok \x1b[2J\x1b]0;pwned\x07 é\x9b31m line\x0d`+"\nnext\ttab "+`\u2028 🐍 end`; got != want {
		t.Errorf("TerminalText = %q, want %q", got, want)
	}
}

func TestTerminalWriterFlushesACutCharacter(t *testing.T) {
	t.Parallel()
	var out bytes.Buffer
	w := NewTerminalWriter(&out)
	w.Write([]byte("a\xf0\x9f"))
	if out.String() != "a" {
		t.Fatalf("before Flush: %q", out.String())
	}
	if err := w.Flush(); err != nil || out.String() != "a\ufffd\ufffd" {
		t.Fatalf("after Flush: %q %v", out.String(), err)
	}
}
