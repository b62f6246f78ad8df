// Package toolwrap generates what a sandboxed program sees of the MCP tools
// it may call: a Python package (gatekeeper_tools) and a Node module
// (gatekeeper-tools, with .d.ts types), each a small runtime that speaks the
// bridge's JSON-lines protocol on $GATEKEEPER_TOOLS/bridge.sock plus one
// module per server with one function per tool, and the short text that
// tells the model they are there (Describe).
//
// The input is what the servers answered to tools/list, already narrowed
// to the tools the query may call: Generate writes exactly the tools it is
// given. Everything a server says (names, descriptions, schemas) reaches
// the generated code only as an escaped string literal, a sanitised
// identifier or the text of a comment that cannot end early, so a schema
// cannot inject code. The output is deterministic; Hash names it for a
// cache.
package toolwrap

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

// Root directories of the two languages under $GATEKEEPER_TOOLS, and the
// package each holds.
const (
	PythonDir     = "python"
	PythonPackage = "gatekeeper_tools"
	NodeDir       = "node"
	NodePackage   = "gatekeeper-tools"
)

var serverName = regexp.MustCompile(`^[a-z][a-z0-9_]{0,31}$`)

// ValidServerName reports whether name may name a server whose tools get
// wrappers: ^[a-z][a-z0-9_]{0,31}$ (runner.ServerTools.Name).
func ValidServerName(name string) bool { return serverName.MatchString(name) }

// Generate returns the files of the wrappers for servers, keyed by their
// path relative to $GATEKEEPER_TOOLS. It fails on a server name that does
// not match ValidServerName, two servers of one name, or two tools of
// one name in a server; a schema it cannot read gives a tool untyped
// parameters rather than an error. It reads each server's Name,
// Description (one line is shown to the model, the rest is in the module's
// docs) and Tools (exactly the tools the program may call; their hints are
// shown in their docs, Title is not used); a caller passes only servers
// that are up (Err nil).
func Generate(servers []runner.ServerTools) (map[string][]byte, error) {
	ss, err := plan(servers)
	if err != nil {
		return nil, err
	}
	files := map[string][]byte{}
	py := PythonDir + "/" + PythonPackage + "/"
	js := NodeDir + "/" + NodePackage + "/"
	files[py+"__init__.py"] = pythonRuntime(ss)
	files[js+"index.js"] = nodeRuntime(ss)
	files[js+"index.d.ts"] = []byte(runtimeDTS)
	for _, s := range ss {
		files[py+s.module+".py"] = pythonModule(s)
		files[js+s.module+".js"] = nodeModule(s)
		files[js+s.module+".d.ts"] = nodeTypes(s)
	}
	return files, nil
}

// Hash returns the sha256 of a tree Generate made (every path and content,
// in path order), hex-encoded: the key to cache it under.
func Hash(files map[string][]byte) string {
	h := sha256.New()
	paths := make([]string, 0, len(files))
	for p := range files {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		fmt.Fprintf(h, "%d:%s%d:", len(p), p, len(files[p]))
		h.Write(files[p])
	}
	return hex.EncodeToString(h.Sum(nil))
}

// plannedServer is a server with the names its code uses.
type plannedServer struct {
	runner.ServerTools
	module string
	tools  []plannedTool
}

type plannedTool struct {
	runner.ToolInfo
	fn       string // function name, in both languages
	typeName string // TypeScript interface prefix
	in, out  *schema
}

// plan checks servers, sorts them and their tools, and names everything.
func plan(servers []runner.ServerTools) ([]plannedServer, error) {
	var errs []error
	seen := map[string]bool{}
	ss := slices.Clone(servers)
	slices.SortFunc(ss, func(a, b runner.ServerTools) int { return strings.Compare(a.Name, b.Name) })
	modules := newNamer(moduleReserved)
	var out []plannedServer
	for _, s := range ss {
		if !serverName.MatchString(s.Name) {
			errs = append(errs, fmt.Errorf("server %q: the name must match %s", s.Name, serverName))
			continue
		}
		if seen[s.Name] {
			errs = append(errs, fmt.Errorf("server %q: listed twice", s.Name))
			continue
		}
		seen[s.Name] = true
		p := plannedServer{ServerTools: s, module: modules.name(s.Name)}
		tools := slices.Clone(s.Tools)
		slices.SortFunc(tools, func(a, b runner.ToolInfo) int { return strings.Compare(a.Name, b.Name) })
		fns := newNamer(toolReserved)
		types := newNamer(typeReserved)
		for i, t := range tools {
			if i > 0 && tools[i-1].Name == t.Name {
				errs = append(errs, fmt.Errorf("server %q: tool %q listed twice", s.Name, t.Name))
				continue
			}
			p.tools = append(p.tools, plannedTool{
				ToolInfo: t,
				fn:       fns.name(t.Name),
				typeName: types.name(pascal(t.Name)),
				in:       parseSchema(t.InputSchema),
				out:      parseSchema(t.OutputSchema),
			})
		}
		out = append(out, p)
	}
	return out, errors.Join(errs...)
}

// manifest is what servers() returns in both languages.
func manifest(ss []plannedServer) string {
	type entry struct {
		Module      string            `json:"module"`
		Description string            `json:"description"`
		Tools       map[string]string `json:"tools"`
	}
	m := map[string]entry{}
	for _, s := range ss {
		e := entry{Module: s.module, Description: s.Description, Tools: map[string]string{}}
		for _, t := range s.tools {
			e.Tools[t.Name] = t.fn
		}
		m[s.Name] = e
	}
	b, _ := json.Marshal(m) // sorted keys: deterministic
	return string(b)
}

// literal returns s as a double-quoted string literal that Python, JavaScript
// and TypeScript all read back as s: JSON's escapes are a subset of theirs,
// and encoding/json escapes every control character, U+2028 and U+2029.
func literal(s string) string {
	b, _ := json.Marshal(strings.ToValidUTF8(s, "\uFFFD"))
	return string(b)
}

// namer hands out identifiers: [A-Za-z0-9_] only (ASCII, so no Unicode
// normalisation can merge two), never a reserved word, never one handed out
// before (a later name gets _2, _3, …).
type namer struct {
	taken map[string]bool
}

func newNamer(reserved []string) *namer {
	n := &namer{taken: map[string]bool{}}
	for _, r := range reserved {
		n.taken[r] = true
	}
	return n
}

func (n *namer) name(raw string) string {
	base := identifier(raw)
	if n.taken[base] {
		base += "_"
	}
	name := base
	for i := 2; n.taken[name]; i++ {
		name = base + strconv.Itoa(i)
	}
	n.taken[name] = true
	return name
}

// identifier maps raw to [A-Za-z_][A-Za-z0-9_]*, not starting with "__".
func identifier(raw string) string {
	var b strings.Builder
	for _, r := range raw {
		switch {
		case r >= 'a' && r <= 'z', r >= 'A' && r <= 'Z', r >= '0' && r <= '9', r == '_':
			b.WriteRune(r)
		default:
			b.WriteByte('_')
		}
	}
	s := b.String()
	if s == "" || strings.Trim(s, "_") == "" {
		return "x" + s
	}
	if s[0] >= '0' && s[0] <= '9' || strings.HasPrefix(s, "__") {
		return "x" + s
	}
	return s
}

// pascal turns a tool name into a TypeScript type name prefix.
func pascal(raw string) string {
	var b strings.Builder
	up := true
	for _, r := range raw {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
		if !ok {
			up = true
			continue
		}
		if up && r >= 'a' && r <= 'z' {
			r -= 'a' - 'A'
		}
		up = false
		b.WriteRune(r)
	}
	s := b.String()
	if s == "" || s[0] >= '0' && s[0] <= '9' {
		s = "T" + s
	}
	return s
}

// Words no generated identifier may be: Python's and JavaScript's keywords
// and reserved words, the names the generated code itself uses, and
// JavaScript's special property names.
var keywords = []string{
	// Python
	"False", "None", "True", "and", "as", "assert", "async", "await", "break", "class", "continue", "def", "del",
	"elif", "else", "except", "finally", "for", "from", "global", "if", "import", "in", "is", "lambda",
	"nonlocal", "not", "or", "pass", "raise", "return", "try", "while", "with", "yield",
	// JavaScript / TypeScript
	"case", "catch", "const", "debugger", "default", "delete", "do", "enum", "export", "extends", "false",
	"function", "instanceof", "new", "null", "super", "switch", "this", "throw", "true", "typeof", "var",
	"void", "let", "static", "implements", "interface", "package", "private", "protected", "public",
	"arguments", "eval", "undefined", "NaN", "Infinity", "constructor", "prototype", "require", "module", "exports",
	// A module whose exports have a then is taken for a promise by import().
	"then",
}

var (
	// moduleReserved: a server module must not shadow the runtime's public
	// names (a submodule becomes an attribute of the package) nor be
	// index.js.
	moduleReserved = append(slices.Clone(keywords), "call", "servers", "index")
	// toolReserved: names a generated server module defines itself.
	toolReserved = append(slices.Clone(keywords), "annotations", "_annotations", "Any", "Literal", "NotRequired", "Optional", "TypedDict", "_gk", "_invoke")
	// paramReserved: names a generated Python function's body uses.
	paramReserved = append(slices.Clone(keywords), "_gk", "_args")
	// typeReserved: names a generated .d.ts declares or imports.
	typeReserved = append(slices.Clone(keywords), "CallToolResult", "ToolContent")
)
