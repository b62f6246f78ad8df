// Package rego embeds gatekeeper's built-in Rego policies, gatekeeper.rego
// (the tool-call decision) and constraints.rego (what a per-query override
// may change) with their *_test.rego tests, and compiles policies with the
// capabilities gatekeeper allows.
package rego

import (
	"embed"
	"fmt"
	"io/fs"
	"slices"
	"strings"

	"github.com/open-policy-agent/opa/v1/ast"
)

//go:embed *.rego
var files embed.FS

// Files returns the embedded .rego files, tests included.
func Files() fs.FS { return files }

// Builtin returns the embedded policy modules (name → source), tests
// excluded, named "rego/<file>".
func Builtin() (map[string]string, error) {
	mods := map[string]string{}
	err := fs.WalkDir(files, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || strings.HasSuffix(p, "_test.rego") {
			return err
		}
		b, err := fs.ReadFile(files, p)
		mods["rego/"+p] = string(b)
		return err
	})
	return mods, err
}

// Capabilities are OPA's built-ins minus everything that reaches the
// network or the host: a policy cannot call out and cannot read the
// sidecar's environment.
func Capabilities() *ast.Capabilities {
	caps := ast.CapabilitiesForThisVersion()
	banned := map[string]bool{"http.send": true, "net.lookup_ip_addr": true, "opa.runtime": true}
	caps.Builtins = slices.DeleteFunc(slices.Clone(caps.Builtins), func(b *ast.Builtin) bool { return banned[b.Name] })
	caps.AllowNet = []string{}
	return caps
}

// Compile parses modules (name → source) as Rego v1 and compiles them with
// Capabilities, with no check of who wrote what: the tests' compiler. The
// sidecar compiles with CompilePolicy. Errors name the file, line and
// column.
func Compile(mods map[string]string) (*ast.Compiler, error) {
	parsed, err := parse(mods)
	if err != nil {
		return nil, err
	}
	return compileParsed(parsed)
}

// parse parses modules (name → source) as Rego v1.
func parse(mods map[string]string) (map[string]*ast.Module, error) {
	parsed := make(map[string]*ast.Module, len(mods))
	for name, src := range mods {
		m, err := ast.ParseModuleWithOpts(name, src, ast.ParserOptions{RegoVersion: ast.RegoV1})
		if err != nil {
			return nil, err
		}
		parsed[name] = m
	}
	return parsed, nil
}

// compileParsed compiles parsed modules with Capabilities.
func compileParsed(parsed map[string]*ast.Module) (*ast.Compiler, error) {
	c := ast.NewCompiler().WithCapabilities(Capabilities())
	if c.Compile(parsed); c.Failed() {
		return nil, fmt.Errorf("compile: %w", c.Errors)
	}
	return c, nil
}
