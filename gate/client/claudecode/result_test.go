package claudecode

import (
	"bytes"
	"encoding/json"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/wire"
	"github.com/gatekeeper-ai/gatekeeper/internal/goldenfile"
	"github.com/gatekeeper-ai/gatekeeper/internal/untrusted"
)

// runResultCase is one file of testdata/run-results: a run_result as the
// sidecar sends it, and the text and structuredContent the model reads.
type runResultCase struct {
	path       string
	raw        json.RawMessage
	RunResult  wire.RunResult
	Text       string
	Structured json.RawMessage
}

func runResultCases(t *testing.T) []runResultCase {
	t.Helper()
	files, err := filepath.Glob(filepath.Join("testdata", "run-results", "*.json"))
	if err != nil || len(files) < 9 {
		t.Fatalf("run-results: %v %v", files, err)
	}
	var cases []runResultCase
	for _, f := range files {
		data, err := os.ReadFile(f)
		must(t, err)
		var c struct {
			RunResult  json.RawMessage `json:"run_result"`
			Text       string          `json:"text"`
			Structured json.RawMessage `json:"structured"`
		}
		must(t, json.Unmarshal(data, &c))
		rc := runResultCase{path: f, raw: c.RunResult, Text: c.Text, Structured: c.Structured}
		must(t, json.Unmarshal(c.RunResult, &rc.RunResult))
		cases = append(cases, rc)
	}
	return cases
}

// TestFormatRunResultMatchesTheSDKClient checks the Go formatting against
// testdata/run-results, which @gatekeeper/client's tests (ts-client/test/
// untrusted.test.ts) and the CLI tests (walkthroughs/test) check
// formatRunResult against. -update rewrites each file's text and
// structured from its run_result.
func TestFormatRunResultMatchesTheSDKClient(t *testing.T) {
	t.Parallel()
	for _, c := range runResultCases(t) {
		if *update {
			writeRunResultCase(t, c)
			continue
		}
		if got := FormatRunResult(&c.RunResult); got != c.Text {
			t.Errorf("%s: text\n%s\nwant\n%s", c.path, got, c.Text)
		}
		// Go escapes <, > and & where JavaScript does not: the same string.
		var compact, want bytes.Buffer
		must(t, json.Compact(&compact, c.Structured))
		json.HTMLEscape(&want, compact.Bytes())
		if got, _ := json.Marshal(structured(&c.RunResult)); string(got) != want.String() {
			t.Errorf("%s: structuredContent %s, want %s", c.path, got, c.Structured)
		}
	}
}

// writeRunResultCase rewrites c's file with the text and structured that
// this package writes for its run_result, which it keeps byte for byte.
func writeRunResultCase(t *testing.T, c runResultCase) {
	t.Helper()
	marshal := func(v any, indent string) []byte {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		enc.SetIndent(indent, "  ")
		must(t, enc.Encode(v))
		return bytes.TrimSuffix(b.Bytes(), []byte("\n"))
	}
	var out bytes.Buffer
	out.WriteString("{\n  \"run_result\": ")
	out.Write(c.raw)
	out.WriteString(",\n  \"text\": ")
	out.Write(marshal(FormatRunResult(&c.RunResult), ""))
	out.WriteString(",\n  \"structured\": ")
	out.Write(marshal(structured(&c.RunResult), "  "))
	out.WriteString("\n}\n")
	goldenfile.Write(t, c.path, out.Bytes())
}

// lineBreak is every character after which a reader may see a new line.
func lineBreak(r rune) bool {
	return r == '\n' || r == '\r' || r == '\v' || r == '\f' || r == '\u0085' || r == '\u2028' || r == '\u2029'
}

var fenceLine = regexp.MustCompile(`^the program's output follows, each part between a line "<<< ([0-9a-f]{16}) <part>" and a line ">>> ([0-9a-f]{16}) <part>"; no output contains ([0-9a-f]{16})$`)

// readRendered reads text as the model is told to: gatekeeper's field
// lines, then each part from its "<<< F name" line to the first line
// ">>> F name" after it, F being the fence the last field names. It fails
// t where the text does not follow that layout.
func readRendered(t *testing.T, text string) (fields []string, parts map[string]string) {
	t.Helper()
	parts = map[string]string{}
	head, body, fenced := strings.Cut(text, "\n<<< ")
	fields = strings.FieldsFunc(head, lineBreak)
	if !fenced {
		return fields, parts
	}
	m := fenceLine.FindStringSubmatch(fields[len(fields)-1])
	if m == nil || m[1] != m[2] || m[2] != m[3] {
		t.Fatalf("the text has parts but its last field does not name their fence:\n%s", text)
	}
	fence := m[1]
	rest := "<<< " + body
	for rest != "" {
		header, after, ok := strings.Cut(rest, "\n")
		name, isPart := strings.CutPrefix(header, "<<< "+fence+" ")
		if !ok || !isPart {
			t.Fatalf("%q is not the start of a part (fence %s):\n%s", header, fence, text)
		}
		end := "\n>>> " + fence + " " + name
		i := strings.Index(after, end)
		if i < 0 || i != strings.Index(after, "\n>>> "+fence+" ") {
			t.Fatalf("part %s has no end of its own:\n%s", name, text)
		}
		parts[name] = after[:i+1]
		rest = strings.TrimPrefix(after[i+len(end):], "\n")
	}
	return fields, parts
}

// TestPrintedOutputAddsNoFields reads every shared run result as the model
// is told to and finds gatekeeper's fields exactly once, each with the
// result's own value, and each text of the program whole in its own part:
// among them output that prints the field lines (printed-fields.json),
// that guesses the fence, a fixed one and one computed from the rest of its
// output, in stdout, stderr and a file's text (guessed-fence.json), and
// file names that try to start lines (hostile-names.json).
func TestPrintedOutputAddsNoFields(t *testing.T) {
	t.Parallel()
	for _, c := range runResultCases(t) {
		t.Run(filepath.Base(c.path), func(t *testing.T) {
			t.Parallel()
			r := &c.RunResult
			fields, parts := readRendered(t, FormatRunResult(r))
			count := func(prefix string) (n int, line string) {
				for _, f := range fields {
					if strings.HasPrefix(f, prefix) {
						n, line = n+1, f
					}
				}
				return n, line
			}
			wantTexts := map[string]string{}
			for _, s := range []struct{ name, text string }{{"stdout", r.Stdout}, {"stderr", r.Stderr}} {
				n, line := count(s.name + ":")
				want := s.name + ": (empty)"
				if s.text != "" {
					want = s.name + ": below"
					wantTexts[s.name] = s.text
				}
				if n != 1 || line != want {
					t.Errorf("%d %s fields, the last %q; want one, %q", n, s.name, line, want)
				}
			}
			if n, line := count("exit code "); n != 1 || !strings.HasPrefix(line, "exit code "+strconv.Itoa(r.ExitCode)+" ("+r.Reason+") ") {
				t.Errorf("%d exit code fields, the last %q; want one, of exit code %d", n, line, r.ExitCode)
			}
			if n, line := count("truncated="); n != 1 || line != "truncated="+strconv.FormatBool(r.Truncated)+" timed_out="+strconv.FormatBool(r.TimedOut)+" oom_killed="+strconv.FormatBool(r.OOMKilled) {
				t.Errorf("%d flag fields, the last %q", n, line)
			}
			if n, line := count("tool calls:"); (r.ToolCalls == 0 && n != 0) || (r.ToolCalls > 0 && (n != 1 || !strings.HasPrefix(line, "tool calls: "+strconv.Itoa(r.ToolCalls)+" "))) {
				t.Errorf("%d tool calls fields, the last %q; the run made %d", n, line, r.ToolCalls)
			}
			if n, _ := count("file "); n != len(r.Files) {
				t.Errorf("%d file fields for %d files", n, len(r.Files))
			}
			if n, _ := count("workspace:"); n != min(len(r.WorkspaceNote), 1) {
				t.Errorf("%d workspace fields, the result has note %q", n, r.WorkspaceNote)
			}
			for _, f := range structured(r).Files {
				if f.Text != nil && *f.Text != "" {
					wantTexts["file "+untrusted.Quote(f.Path)] = *f.Text
				}
			}
			if len(parts) != len(wantTexts) {
				t.Errorf("parts %q, want %q", slices.Sorted(maps.Keys(parts)), slices.Sorted(maps.Keys(wantTexts)))
			}
			for name, want := range wantTexts {
				if got := parts[name]; got != want && got != want+"\n" {
					t.Errorf("part %s is %q, want the program's %q", name, got, want)
				}
			}
		})
	}
}

// TestTheFenceIsOneNoPartContains: past a candidate that a part's text or
// name contains, the fence is the next candidate; the derivation is the
// same for the same parts, and another for other parts.
func TestTheFenceIsOneNoPartContains(t *testing.T) {
	t.Parallel()
	candidate := func(n int) string { return "fence" + strconv.Itoa(n) + "!" }
	for _, tc := range []struct {
		name  string
		parts []outputPart
		want  string
	}{
		{"no part contains the first", []outputPart{{"stdout", "fence1!"}}, "fence0!"},
		{"a text contains the first two", []outputPart{{"stdout", "x fence0! y"}, {"stderr", "fence1!"}}, "fence2!"},
		{"a name contains the first", []outputPart{{`file "fence0!"`, "x"}}, "fence1!"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := firstAbsent(tc.parts, candidate); got != tc.want {
				t.Errorf("firstAbsent = %q, want %q", got, tc.want)
			}
		})
	}
	a := []outputPart{{"stdout", "42\n"}}
	if f := outputFence(a); f != outputFence([]outputPart{{"stdout", "42\n"}}) || f == outputFence([]outputPart{{"stdout", "43\n"}}) || f == outputFence([]outputPart{{"stderr", "42\n"}}) || len(f) != 16 {
		t.Errorf("outputFence is not a 16-digit function of the parts: %q", f)
	}
}

// TestFileNamesAddNoLines replays names that try to write lines of their
// own (LF, CR, NEL, U+2028/U+2029, escape sequences, a quote that would
// end the quoted name), an image's among them: each stays in its file's
// line, quoted.
func TestFileNamesAddNoLines(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "run-results", "hostile-names.json"))
	must(t, err)
	var c struct {
		RunResult wire.RunResult `json:"run_result"`
	}
	must(t, json.Unmarshal(data, &c))
	text := FormatRunResult(&c.RunResult)
	fields, _ := readRendered(t, text)
	var files int
	for _, l := range fields {
		switch {
		case strings.HasPrefix(l, `file "`):
			files++
		case strings.HasPrefix(l, "workspace"), strings.HasPrefix(l, "FORGED"), strings.HasPrefix(l, "(created"), strings.HasPrefix(l, "file ok"):
			t.Errorf("a name wrote the line %q", l)
		case strings.HasPrefix(l, "stdout") && l != "stdout: (empty)":
			t.Errorf("a name wrote the line %q", l)
		}
	}
	if files != len(c.RunResult.Files) {
		t.Errorf("%d file lines for %d files:\n%s", files, len(c.RunResult.Files), text)
	}
	if strings.ContainsAny(text, "\x1b\x07\x7f\u009b\u202e") {
		t.Errorf("an escape sequence or a bidi control reaches the model:\n%q", text)
	}
}

// TestAToAgentImageIsNotShownToTheModel checks that an image the run
// returned to the agent's code only is no image content: the model reads
// its handle (testdata/run-results/to-agent.json), not the picture.
func TestAToAgentImageIsNotShownToTheModel(t *testing.T) {
	t.Parallel()
	data, err := os.ReadFile(filepath.Join("testdata", "run-results", "to-agent.json"))
	must(t, err)
	var c struct {
		RunResult wire.RunResult `json:"run_result"`
	}
	must(t, json.Unmarshal(data, &c))
	if got := imageBlocks(&c.RunResult); len(got) != 0 {
		t.Errorf("image blocks %v; want none for a to_agent image", got)
	}
	c.RunResult.Files[0].ToAgent = false
	if got := imageBlocks(&c.RunResult); len(got) != 1 {
		t.Errorf("image blocks %v; want the image once it is not to_agent (the test can fail)", got)
	}
}
