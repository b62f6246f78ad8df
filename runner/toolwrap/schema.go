package toolwrap

import (
	"bytes"
	"encoding/json"
	"strings"
)

// maxDepth bounds how deep a schema is followed; below it a value is Any
// (Python) or unknown (TypeScript).
const maxDepth = 6

// schema is the part of a JSON Schema the wrappers use. A nil *schema is
// "anything".
type schema struct {
	Types       []string // "string", "integer", "number", "boolean", "array", "object", "null"
	Description string
	Enum        []json.RawMessage // const is an enum of one
	Properties  []property        // in the schema's order
	Required    map[string]bool
	Items       *schema
	// Additional is the schema of properties not named; nil with
	// AdditionalAny false means none are declared.
	Additional    *schema
	AdditionalAny bool
	AnyOf         []*schema // anyOf / oneOf
	Default       json.RawMessage
	// pyName is the Python TypedDict that stands for this object schema
	// in a generated module, or "" (see pyTypedDicts).
	pyName string
}

type property struct {
	Name   string
	Schema *schema
}

// rawSchema is how a schema is decoded before it is read.
type rawSchema struct {
	Type                 json.RawMessage   `json:"type"`
	Description          string            `json:"description"`
	Title                string            `json:"title"`
	Enum                 []json.RawMessage `json:"enum"`
	Const                json.RawMessage   `json:"const"`
	Properties           json.RawMessage   `json:"properties"`
	Required             []string          `json:"required"`
	Items                json.RawMessage   `json:"items"`
	AdditionalProperties json.RawMessage   `json:"additionalProperties"`
	AnyOf                []json.RawMessage `json:"anyOf"`
	OneOf                []json.RawMessage `json:"oneOf"`
	Default              json.RawMessage   `json:"default"`
}

// parseSchema reads raw; nil, `true`, or anything it cannot read is nil.
func parseSchema(raw json.RawMessage) *schema { return parseDepth(raw, 0) }

func parseDepth(raw json.RawMessage, depth int) *schema {
	raw = bytes.TrimSpace(raw)
	if depth > maxDepth || len(raw) == 0 || raw[0] != '{' {
		return nil
	}
	var r rawSchema
	if json.Unmarshal(raw, &r) != nil {
		return nil
	}
	s := &schema{Description: r.Description, Default: r.Default, Enum: r.Enum}
	if s.Description == "" {
		s.Description = r.Title
	}
	if len(r.Const) > 0 {
		s.Enum = []json.RawMessage{r.Const}
	}
	var one string
	if json.Unmarshal(r.Type, &one) == nil {
		s.Types = []string{one}
	} else {
		_ = json.Unmarshal(r.Type, &s.Types)
	}
	if len(r.Required) > 0 {
		s.Required = map[string]bool{}
		for _, n := range r.Required {
			s.Required[n] = true
		}
	}
	for _, p := range orderedObject(r.Properties) {
		s.Properties = append(s.Properties, property{Name: p.key, Schema: parseDepth(p.value, depth+1)})
	}
	if len(r.Properties) > 0 && len(s.Types) == 0 {
		s.Types = []string{"object"}
	}
	s.Items = parseDepth(r.Items, depth+1)
	switch a := bytes.TrimSpace(r.AdditionalProperties); {
	case string(a) == "true":
		s.AdditionalAny = true
	case len(a) > 0 && a[0] == '{':
		s.Additional = parseDepth(a, depth+1)
		s.AdditionalAny = s.Additional == nil
	}
	for _, a := range append(r.AnyOf, r.OneOf...) {
		s.AnyOf = append(s.AnyOf, parseDepth(a, depth+1))
	}
	return s
}

type member struct {
	key   string
	value json.RawMessage
}

// orderedObject returns the members of a JSON object in their order; a
// key given twice keeps its first place and its last value, as
// encoding/json would read it.
func orderedObject(raw json.RawMessage) []member {
	d := json.NewDecoder(bytes.NewReader(raw))
	if t, err := d.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var out []member
	at := map[string]int{}
	for d.More() {
		t, err := d.Token()
		if err != nil {
			return nil
		}
		k, _ := t.(string)
		var v json.RawMessage
		if d.Decode(&v) != nil {
			return nil
		}
		if i, ok := at[k]; ok {
			out[i].value = v
			continue
		}
		at[k] = len(out)
		out = append(out, member{k, v})
	}
	return out
}

// isObject reports whether s describes an object with named properties.
func (s *schema) isObject() bool {
	return s != nil && len(s.Properties) > 0
}

// python returns s as a Python type hint (written under `from __future__
// import annotations`, so it is never evaluated).
func (s *schema) python() string {
	if s == nil {
		return "Any"
	}
	if s.pyName != "" {
		return s.pyName
	}
	if len(s.Enum) > 0 {
		var lits []string
		for _, e := range s.Enum {
			if l, ok := pythonLiteral(e); ok {
				lits = append(lits, l)
			} else {
				return "Any"
			}
		}
		return "Literal[" + strings.Join(lits, ", ") + "]"
	}
	if len(s.AnyOf) > 0 && len(s.Types) == 0 {
		var alts []string
		for _, a := range s.AnyOf {
			alts = appendUnique(alts, a.python())
		}
		return union(alts, " | ")
	}
	var alts []string
	for _, t := range s.Types {
		switch t {
		case "string":
			alts = appendUnique(alts, "str")
		case "integer":
			alts = appendUnique(alts, "int")
		case "number":
			alts = appendUnique(alts, "float")
		case "boolean":
			alts = appendUnique(alts, "bool")
		case "null":
			alts = appendUnique(alts, "None")
		case "array":
			alts = appendUnique(alts, "list["+s.Items.python()+"]")
		case "object":
			v := "Any"
			if s.Additional != nil && !s.isObject() {
				v = s.Additional.python()
			}
			alts = appendUnique(alts, "dict[str, "+v+"]")
		default:
			return "Any"
		}
	}
	if len(alts) == 0 {
		return "Any"
	}
	return union(alts, " | ")
}

// pythonLiteral returns a JSON scalar as a Python literal.
func pythonLiteral(raw json.RawMessage) (string, bool) {
	return scalarLiteral(raw, "True", "False", "None")
}

// isNumber reports whether raw is a plain JSON number, which reads the
// same in Python and TypeScript.
func isNumber(raw json.RawMessage) bool {
	s := strings.TrimSpace(string(raw))
	if s == "" {
		return false
	}
	for i, r := range s {
		if !(r >= '0' && r <= '9' || r == '.' || r == 'e' || r == 'E' || r == '+' || r == '-' && (i == 0 || s[i-1] == 'e' || s[i-1] == 'E')) {
			return false
		}
	}
	return true
}

// ts returns s as a TypeScript type; indent is the indentation of the line
// it starts on.
func (s *schema) ts(indent string) string {
	if s == nil {
		return "unknown"
	}
	if len(s.Enum) > 0 {
		var lits []string
		for _, e := range s.Enum {
			l, ok := tsLiteral(e)
			if !ok {
				return "unknown"
			}
			lits = appendUnique(lits, l)
		}
		return union(lits, " | ")
	}
	if len(s.AnyOf) > 0 && len(s.Types) == 0 {
		var alts []string
		for _, a := range s.AnyOf {
			alts = appendUnique(alts, a.ts(indent))
		}
		return union(alts, " | ")
	}
	var alts []string
	for _, t := range s.Types {
		switch t {
		case "string":
			alts = appendUnique(alts, "string")
		case "integer", "number":
			alts = appendUnique(alts, "number")
		case "boolean":
			alts = appendUnique(alts, "boolean")
		case "null":
			alts = appendUnique(alts, "null")
		case "array":
			item := s.Items.ts(indent)
			if strings.ContainsAny(item, "|&") {
				item = "(" + item + ")"
			}
			alts = appendUnique(alts, item+"[]")
		case "object":
			alts = appendUnique(alts, s.tsObject(indent))
		default:
			return "unknown"
		}
	}
	if len(alts) == 0 {
		return "unknown"
	}
	return union(alts, " | ")
}

// tsObject returns an object type literal: each property with its doc
// comment, then an index signature for the properties not named.
func (s *schema) tsObject(indent string) string {
	var b strings.Builder
	b.WriteString("{\n")
	s.tsMembers(&b, indent+"  ")
	b.WriteString(indent + "}")
	return b.String()
}

// tsMembers writes the members of an object type, one per line.
func (s *schema) tsMembers(b *strings.Builder, indent string) {
	for _, p := range s.Properties {
		if doc := p.Schema.doc(); doc != "" {
			b.WriteString(jsDoc(doc, indent))
		}
		opt := "?"
		if s.Required[p.Name] {
			opt = ""
		}
		b.WriteString(indent + tsKey(p.Name) + opt + ": " + p.Schema.ts(indent) + ";\n")
	}
	switch {
	case s.Additional != nil:
		v := s.Additional.ts(indent)
		if len(s.Properties) > 0 {
			v = "unknown" // named properties must fit the index signature
		}
		b.WriteString(indent + "[key: string]: " + v + ";\n")
	case s.AdditionalAny || len(s.Properties) == 0:
		b.WriteString(indent + "[key: string]: unknown;\n")
	}
}

// doc is what a property's comment says: its description, its default.
func (s *schema) doc() string {
	if s == nil {
		return ""
	}
	d := s.Description
	if len(s.Default) > 0 {
		if d != "" {
			d += " "
		}
		d += "Default: " + string(compact(s.Default)) + "."
	}
	return d
}

func compact(raw json.RawMessage) []byte {
	var b bytes.Buffer
	if json.Compact(&b, raw) != nil {
		return []byte("?")
	}
	return b.Bytes()
}

// tsKey returns a property name as a TypeScript key: bare when it is a
// plain identifier, a string literal otherwise.
func tsKey(name string) string {
	if name != "" && identifier(name) == name && name != "__proto__" {
		return name
	}
	return literal(name)
}

// tsLiteral returns a JSON scalar as a TypeScript literal type.
func tsLiteral(raw json.RawMessage) (string, bool) {
	return scalarLiteral(raw, "true", "false", "null")
}

// scalarLiteral returns a JSON scalar as a literal of a language that
// spells true, false and null as given; strings are JSON string literals,
// valid in both languages. ok is false for anything but a scalar.
func scalarLiteral(raw json.RawMessage, yes, no, null string) (string, bool) {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return "", false
	}
	switch v := v.(type) {
	case string:
		return literal(v), true
	case bool:
		if v {
			return yes, true
		}
		return no, true
	case nil:
		return null, true
	case float64:
		return strings.TrimSpace(string(raw)), isNumber(raw)
	}
	return "", false
}

func appendUnique(xs []string, x string) []string {
	for _, y := range xs {
		if y == x {
			return xs
		}
	}
	return append(xs, x)
}

func union(alts []string, sep string) string {
	for _, a := range alts {
		if a == "Any" || a == "unknown" {
			return a
		}
	}
	return strings.Join(alts, sep)
}
