package runner_test

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// TestLanguageCopiesAgreeWithRunnerLanguages pins every copy of the run
// languages that cannot import runner.Languages, the one declaration: the
// TypeScript client's types, its zod schema and the tool description the
// model reads, and the protocol document independent clients are written
// from. Each is read from its source file; a language added, removed or
// renamed on either side fails here, naming the file. (Go takes the list
// from runner.Languages; Rego and the bench's JS floor from the input's
// run_languages; runner/docker pins its interpreters in its own test.)
func TestLanguageCopiesAgreeWithRunnerLanguages(t *testing.T) {
	t.Parallel()
	want := runner.LanguageNames()
	// "python, sh or node", as the prose copies write the list.
	prose := strings.Join(want[:len(want)-1], ", ") + " or " + want[len(want)-1]
	quoted := func(q string) string {
		out := make([]string, len(want))
		for i, l := range want {
			out[i] = q + l + q
		}
		return strings.Join(out[:len(out)-1], ", ") + " or " + out[len(out)-1]
	}
	tests := []struct {
		name, file string
		re         *regexp.Regexp // its first group holds the list
		prose      string         // or the exact text the file must hold
	}{
		// RunArgs (the run tool's arguments) takes RunFrame's.
		{name: "the run frame's type", file: "ts-client/src/protocol.ts", re: regexp.MustCompile(`\blanguage: ((?:'[^']*'(?: \| )?)+);`)},
		{name: "the tool's zod schema", file: "ts-client/src/sandboxed-code.ts", re: regexp.MustCompile(`\blanguage: z\.enum\(\[([^\]]*)\]\)`)},
		{name: "the tool description", file: "ts-client/src/sandboxed-code.ts", prose: "'language: " + quoted(`"`) + "."},
		{name: "the schema's description", file: "ts-client/src/sandboxed-code.ts", prose: "'The interpreter: " + prose + ".'"},
		{name: "the protocol document", file: "docs/protocol.md", prose: "`language` is\n" + quoted("`") + ";"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			src, err := os.ReadFile(filepath.Join("..", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if tt.re == nil {
				if !strings.Contains(string(src), tt.prose) {
					t.Fatalf("%s does not contain %q: its list of languages differs from runner.Languages %v", tt.file, tt.prose, want)
				}
				return
			}
			m := tt.re.FindAllSubmatch(src, -1)
			if len(m) != 1 {
				t.Fatalf("%s: %d matches of %s; want exactly one", tt.file, len(m), tt.re)
			}
			var got []string
			for _, q := range regexp.MustCompile(`'([^']*)'`).FindAllSubmatch(m[0][1], -1) {
				got = append(got, string(q[1]))
			}
			if !slices.Equal(got, want) {
				t.Fatalf("%s lists %v; runner.Languages is %v", tt.file, got, want)
			}
		})
	}
}
