package policy

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"gopkg.in/yaml.v3"
)

type position struct{ line, col int }

// positions maps dotted key paths to where their value stands in the source.
type positions map[string]position

// Load reads, strictly decodes and validates the policy file at path. A
// relative workspace_root is resolved against the file's directory. The
// returned error is an *Error listing every problem with file:line:column.
func Load(path string) (*Policy, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	dir, err := filepath.Abs(filepath.Dir(path))
	if err != nil {
		return nil, fmt.Errorf("load policy %s: %w", path, err)
	}
	return Decode(path, data, dir)
}

// Decode is Load for bytes already read: name is used in messages and dir
// resolves a relative workspace_root.
func Decode(name string, data []byte, dir string) (*Policy, error) {
	p := Default()
	pos, probs := decodeStrict(name, data, reflect.ValueOf(&p).Elem(), "")
	if len(probs) > 0 {
		return nil, &Error{Problems: probs}
	}
	p.resolveRoot(dir)
	p.Sandbox.defaultImage()
	p.file, p.pos = name, pos
	err := p.validate(name, pos)
	p.fillCeilings()
	if err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Policy) resolveRoot(dir string) {
	root := p.WorkspaceRoot
	if root == "" {
		return
	}
	if root == "~" || strings.HasPrefix(root, "~/") {
		if home, err := os.UserHomeDir(); err == nil {
			root = filepath.Join(home, strings.TrimPrefix(root, "~"))
		}
	}
	if !filepath.IsAbs(root) {
		root = filepath.Join(dir, root)
	}
	p.WorkspaceRoot = filepath.Clean(root)
}

// decodeStrict parses data as one YAML (or JSON) document and decodes it
// into v, refusing unknown keys, duplicate keys, nulls and mismatched kinds,
// each with its line and column. Fields absent from data keep v's values.
func decodeStrict(name string, data []byte, v reflect.Value, prefix string) (positions, []Problem) {
	root, probs := parseDoc(name, data)
	if len(probs) > 0 {
		return nil, probs
	}
	return decodeNode(name, root, v, prefix)
}

// parseDoc parses data as exactly one YAML (or JSON) document and returns
// its root node.
func parseDoc(name string, data []byte) (*yaml.Node, []Problem) {
	var doc yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&doc); err != nil {
		return nil, []Problem{yamlProblem(name, err)}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, []Problem{{File: name, Line: extra.Line, Col: extra.Column, Msg: "more than one YAML document"}}
	}
	if doc.Kind != yaml.DocumentNode || len(doc.Content) != 1 {
		return nil, []Problem{{File: name, Line: 1, Col: 1, Msg: "empty document"}}
	}
	return doc.Content[0], nil
}

// decodeNode is decodeStrict for a node already parsed.
func decodeNode(name string, root *yaml.Node, v reflect.Value, prefix string) (positions, []Problem) {
	w := walker{file: name, pos: positions{}}
	w.check(root, v.Type(), prefix)
	if len(w.probs) > 0 {
		return nil, w.probs
	}
	if err := root.Decode(v.Addr().Interface()); err != nil {
		return nil, []Problem{yamlProblem(name, err)}
	}
	return w.pos, nil
}

var lineRE = regexp.MustCompile(`line (\d+)(?:, column (\d+))?: `)

// yamlProblem turns a yaml.v3 error into a Problem, moving "line N" into
// the location.
func yamlProblem(name string, err error) Problem {
	msg := err.Error()
	var te *yaml.TypeError
	if errors.As(err, &te) && len(te.Errors) > 0 {
		msg = te.Errors[0]
	}
	msg = strings.TrimPrefix(msg, "yaml: ")
	p := Problem{File: name, Msg: msg}
	if m := lineRE.FindStringSubmatchIndex(msg); m != nil {
		fmt.Sscan(msg[m[2]:m[3]], &p.Line)
		if m[4] >= 0 {
			fmt.Sscan(msg[m[4]:m[5]], &p.Col)
		}
		p.Msg = msg[:m[0]] + msg[m[1]:]
	}
	return p
}

type walker struct {
	file  string
	pos   positions
	probs []Problem
}

func (w *walker) fail(n *yaml.Node, path, format string, args ...any) {
	w.probs = append(w.probs, Problem{File: w.file, Line: n.Line, Col: n.Column, Path: path, Msg: fmt.Sprintf(format, args...)})
}

var unmarshalerType = reflect.TypeFor[yaml.Unmarshaler]()

// nodeChecker is a type that may be written in more than one shape (a
// single value or a mapping, say): the walker lets it check its own node,
// and its UnmarshalYAML decodes each shape it accepts.
type nodeChecker interface {
	checkNode(w *walker, n *yaml.Node, path string)
}

// check walks node against type t, recording positions and problems.
func (w *walker) check(n *yaml.Node, t reflect.Type, path string) {
	if n.Kind == yaml.AliasNode {
		w.fail(n, path, "YAML aliases are not allowed in a policy")
		return
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		w.fail(n, path, "null is not a value; leave the key out to keep the default")
		return
	}
	if c, ok := reflect.New(t).Interface().(nodeChecker); ok {
		c.checkNode(w, n, path)
		return
	}
	if reflect.PointerTo(t).Implements(unmarshalerType) {
		if n.Kind != yaml.ScalarNode {
			w.fail(n, path, "expected a single value")
		}
		return
	}
	switch t.Kind() {
	case reflect.Struct:
		if n.Kind != yaml.MappingNode {
			w.fail(n, path, "expected a mapping of keys (%s)", strings.Join(fieldNames(t), ", "))
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			key := k.Value
			sub := joinPath(path, key)
			if seen[key] {
				w.fail(k, sub, "key %q appears twice", key)
				continue
			}
			seen[key] = true
			f, ok := fieldByTag(t, key)
			if !ok {
				w.fail(k, sub, "unknown key %q (known: %s)", key, strings.Join(fieldNames(t), ", "))
				continue
			}
			w.pos[sub] = position{val.Line, val.Column}
			w.check(val, f.Type, sub)
		}
	case reflect.Map:
		if n.Kind != yaml.MappingNode {
			w.fail(n, path, "expected a mapping")
			return
		}
		seen := map[string]bool{}
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, val := n.Content[i], n.Content[i+1]
			sub := joinPath(path, k.Value)
			switch {
			case k.Kind != yaml.ScalarNode:
				w.fail(k, path, "a key must be a single value")
				continue
			case seen[k.Value]:
				w.fail(k, sub, "key %q appears twice", k.Value)
				continue
			}
			seen[k.Value] = true
			w.pos[sub] = position{val.Line, val.Column}
			w.check(val, t.Elem(), sub)
		}
	case reflect.Slice:
		if n.Kind != yaml.SequenceNode {
			w.fail(n, path, "expected a list")
			return
		}
		for i, item := range n.Content {
			w.check(item, t.Elem(), fmt.Sprintf("%s[%d]", path, i))
		}
	default:
		if n.Kind != yaml.ScalarNode {
			w.fail(n, path, "expected a single value, not a %s", kindName(n.Kind))
		}
	}
}

func kindName(k yaml.Kind) string {
	switch k {
	case yaml.MappingNode:
		return "mapping"
	case yaml.SequenceNode:
		return "list"
	}
	return "value"
}

func joinPath(prefix, key string) string {
	if prefix == "" {
		return key
	}
	return prefix + "." + key
}

func fieldByTag(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := range t.NumField() {
		f := t.Field(i)
		if tag, _, _ := strings.Cut(f.Tag.Get("yaml"), ","); tag == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func fieldNames(t reflect.Type) []string {
	var names []string
	for i := range t.NumField() {
		if tag, _, _ := strings.Cut(t.Field(i).Tag.Get("yaml"), ","); tag != "" && tag != "-" {
			names = append(names, tag)
		}
	}
	return names
}
