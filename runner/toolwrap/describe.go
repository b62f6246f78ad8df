package toolwrap

import (
	"fmt"
	"slices"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// maxAbout bounds, in bytes, the line that says what a server is for in
// the model's tool description.
const maxAbout = 160

// Describe returns the description of the sandboxed_code tool for a query
// whose programs may call the tools of servers: base (today's description)
// unchanged when there are none, else base followed by one line per
// server (its name, its modules, what it is for, how many tools) and how
// to discover the rest. It grows with the servers, not with their tools or
// schemas: the model reads a server's wrappers when it needs them, as
// Anthropic's "code execution with MCP" has it read tool files. Server
// descriptions are cut to one line of at most maxAbout bytes with control
// characters removed. A server with Err set (down, or not listed in time
// when the run or query began) is named unavailable with Err's text, cut
// likewise and quoted: the MCP client's errors are runner.ServerErrors,
// whose text is the server's name, the kind and a reason in gatekeeper's
// words, never the operator's command, URL or the server's own text. The
// model is
// told its calls fail now and that a later run may have it, rather than
// being left to find a module missing.
func Describe(base string, servers []runner.ServerTools) string {
	if len(servers) == 0 {
		return base
	}
	ss := slices.Clone(servers)
	slices.SortFunc(ss, func(a, b runner.ServerTools) int { return strings.Compare(a.Name, b.Name) })
	modules := newNamer(moduleReserved)
	var b strings.Builder
	b.WriteString(base)
	b.WriteString("\n\nCode mode: a python or node program can call these MCP servers' tools; gatekeeper's policy decides every call " +
		"and may refuse it (the error names the rule). Only what the program prints and the files it returns come back to you, " +
		"so filter and summarise data in the program.\n")
	for _, s := range ss {
		if s.Err != nil {
			// No module: its name is not taken, so that the others' module
			// names are those Generate gives them.
			fmt.Fprintf(&b, "- %s: unavailable now, %q: its tools have no module in this run and calling it fails; a later run "+
				"may have it (gatekeeper_tools.servers() lists the servers a run has)", oneLine(s.Name, maxAbout), oneLine(s.Err.Error(), maxAbout))
			if about := oneLine(s.Description, maxAbout); about != "" {
				b.WriteString("; it is for: " + about)
			}
			b.WriteString("\n")
			continue
		}
		m := modules.name(s.Name)
		n := len(s.Tools)
		plural := "s"
		if n == 1 {
			plural = ""
		}
		fmt.Fprintf(&b, "- %s (%d tool%s", oneLine(s.Name, maxAbout), n, plural)
		if m != s.Name {
			b.WriteString("; module " + m)
		}
		b.WriteString(")")
		if about := oneLine(s.Description, maxAbout); about != "" {
			b.WriteString(": " + about)
		}
		b.WriteString("\n")
	}
	b.WriteString("Each server is a module, named as the server unless shown: import gatekeeper_tools.<module> (python) or " +
		"require('gatekeeper-tools/<module>') (node), with one function per tool, typed parameters and docs. To see them, read " +
		"$GATEKEEPER_TOOLS/python/gatekeeper_tools/<module>.py or $GATEKEEPER_TOOLS/node/gatekeeper-tools/<module>.d.ts, " +
		"or run python3 -c 'import gatekeeper_tools.<module> as s; help(s)'. Python functions take keyword arguments; " +
		"node functions take one arguments object and return a promise. A function returns the tool's structured result " +
		"when it declares an output schema, its text otherwise, and raises gatekeeper_tools.ToolCallError " +
		"(node: rejects with ToolCallError) with .kind and .rule when a call is refused or fails.")
	return b.String()
}

// oneLine returns the first line of s without control characters, cut to
// at most max bytes on a rune boundary.
func oneLine(s string, max int) string {
	s = strings.ToValidUTF8(firstLine(s), "")
	s = strings.Map(func(r rune) rune {
		if r < 0x20 || r == 0x7f || r == '\u2028' || r == '\u2029' || r == '\u0085' {
			return -1
		}
		return r
	}, s)
	if len(s) <= max {
		return s
	}
	cut := max - len("…")
	for cut > 0 && !isRuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

func isRuneStart(c byte) bool { return c&0xC0 != 0x80 }

// MaxSignatureBytes bounds Signature's text.
const MaxSignatureBytes = 600

// Signature returns a short form of a tool's input schema for an error
// that tells a program how to call the tool: its properties in the
// schema's order, each with its type as the Python wrapper hints it, an
// optional one marked "?", as {page: int, size?: int, order?:
// Literal["asc", "desc"]}. Past MaxSignatureBytes the properties that do
// not fit are left out, which "…" says. A schema that names no property
// is "{...}" (any object).
func Signature(t runner.ToolInfo) string {
	in := parseSchema(t.InputSchema)
	if !in.isObject() {
		return "{...}"
	}
	var b strings.Builder
	b.WriteString("{")
	for i, p := range in.Properties {
		part := quoteKey(p.Name)
		if !in.Required[p.Name] {
			part += "?"
		}
		part += ": " + p.Schema.python()
		if i > 0 {
			part = ", " + part
		}
		if b.Len()+len(part)+len(", …}") > MaxSignatureBytes {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString("…")
			break
		}
		b.WriteString(part)
	}
	b.WriteString("}")
	return b.String()
}

// quoteKey writes a property name as it is when it is an identifier,
// quoted as a JSON string otherwise.
func quoteKey(name string) string {
	if pyIdent.MatchString(name) {
		return name
	}
	return literal(name)
}
