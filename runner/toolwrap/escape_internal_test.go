package toolwrap

import (
	"encoding/json"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// nastyTexts returns texts made of the pieces that end or bend literals
// and comments in Python and JavaScript, in random orders (a fixed seed,
// so a failure repeats).
func nastyTexts(n int) []string {
	pieces := []string{`"`, `""`, `"""`, `'`, `'''`, `\`, `\\`, "\n", "\r", "\r\n", "\x00", "\x1b", "\x7f", "*/", "/*", "*", "/",
		"`", "${", "}", "\u2028", "\u2029", "\u0085", "\ufeff", "é", "\U0001F600", " ", "\t", "#", "N{BULLET}", "x", "\xff", "u00e9"}
	r := rand.New(rand.NewPCG(22, 4))
	out := []string{"", `"`, `\`, "\n", `"""`, `a"`, `"a`}
	for range n {
		var b strings.Builder
		for range 1 + r.IntN(12) {
			b.WriteString(pieces[r.IntN(len(pieces))])
		}
		out = append(out, b.String())
	}
	return out
}

// TestEscapesReadBackInPython writes every nasty text as a docstring
// literal and as a string literal in one Python file; Python must read
// each back as the text (the docstring: trimmed, CRLF as LF, a newline at
// the end of a multi-line one).
func TestEscapesReadBackInPython(t *testing.T) {
	t.Parallel()
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Fatalf("python3 is needed: %v", err)
	}
	texts := nastyTexts(400)
	var src strings.Builder
	src.WriteString("import json, sys\ngot = []\n")
	var want []string
	for _, text := range texts {
		src.WriteString("def f():\n" + pyDocstring(text, "    ") + "\n\ngot.append(f.__doc__)\n")
		src.WriteString("got.append(" + literal(text) + ")\n")
		doc := strings.ToValidUTF8(strings.ReplaceAll(strings.TrimSpace(text), "\r\n", "\n"), "\uFFFD")
		doc = strings.ReplaceAll(doc, "\n", "\n    ")
		doc = strings.ReplaceAll(doc, "\n    \n", "\n\n") // blank lines are not indented
		for strings.Contains(doc, "\n    \n") {
			doc = strings.ReplaceAll(doc, "\n    \n", "\n\n")
		}
		if strings.Contains(doc, "\n") {
			doc += "\n    "
		}
		want = append(want, doc, strings.ToValidUTF8(text, "\uFFFD"))
	}
	src.WriteString("json.dump(got, sys.stdout)\n")
	file := filepath.Join(t.TempDir(), "escapes.py")
	if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), python, "-B", file).Output()
	if err != nil {
		t.Fatalf("python: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("text %q read back as %q, want %q", texts[i/2], got[i], want[i])
		}
	}
}

// TestEscapesReadBackInJavaScript puts every nasty text in a doc comment
// followed by a string literal of it; node must parse the file and read
// each literal back as the text, which it cannot if a comment ended early.
func TestEscapesReadBackInJavaScript(t *testing.T) {
	t.Parallel()
	node, err := exec.LookPath("node")
	if err != nil {
		t.Fatalf("node is needed: %v", err)
	}
	texts := nastyTexts(400)
	var src strings.Builder
	src.WriteString("'use strict';\nconst got = [];\n")
	var want []string
	for _, text := range texts {
		src.WriteString(jsDoc(text, "") + "got.push(" + literal(text) + ");\n")
		want = append(want, strings.ToValidUTF8(text, "\uFFFD"))
	}
	src.WriteString("process.stdout.write(JSON.stringify(got));\n")
	file := filepath.Join(t.TempDir(), "escapes.js")
	if err := os.WriteFile(file, []byte(src.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	out, err := exec.CommandContext(t.Context(), node, file).Output()
	if err != nil {
		t.Fatalf("node: %v", err)
	}
	var got []string
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	for i := range got {
		if got[i] != want[i] {
			t.Errorf("text %q read back as %q", texts[i], got[i])
		}
	}
	for _, text := range texts {
		if c := strings.Count(jsDoc(text, ""), "*/"); c != 1 {
			t.Errorf("the comment of %q holds %d */", text, c)
		}
	}
}
