package gate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"
)

// maxToolInputDepth is how deeply tool_input may nest, as encoding/json
// allows.
const maxToolInputDepth = 10000

// errNotObject is parseToolInput's error for anything but one JSON object.
var errNotObject = errors.New("tool_input is not a JSON object")

// parseToolInput reads a tool_input (one JSON object, white space around it
// allowed) straight into the Rego value the policy sees, the value
// encoding/json (numbers kept as written) and ast.InterfaceToValue made of
// it before: strings unescaped as encoding/json does (invalid UTF-8 and
// lone surrogates become U+FFFD), numbers kept as their literal, a
// repeated key's last value kept. Anything else, trailing data included,
// is errNotObject.
func parseToolInput(raw []byte) (ast.Object, error) {
	p := jsonParser{data: raw}
	p.space()
	if p.i == len(p.data) || p.data[p.i] != '{' {
		return nil, errNotObject
	}
	v, err := p.value(0)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errNotObject, err)
	}
	if p.space(); p.i != len(p.data) {
		return nil, fmt.Errorf("%w: data after the object at byte %d", errNotObject, p.i)
	}
	return v.(ast.Object), nil
}

// jsonParser is a recursive-descent JSON reader producing ast values.
type jsonParser struct {
	data []byte
	i    int
}

func (p *jsonParser) space() {
	for p.i < len(p.data) {
		switch p.data[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) errorf(format string, args ...any) error {
	return fmt.Errorf("byte %d: %s", p.i, fmt.Sprintf(format, args...))
}

// value reads the value at p.i (white space skipped before it).
func (p *jsonParser) value(depth int) (ast.Value, error) {
	if depth > maxToolInputDepth {
		return nil, p.errorf("nested too deeply")
	}
	p.space()
	if p.i == len(p.data) {
		return nil, p.errorf("unexpected end")
	}
	switch c := p.data[p.i]; {
	case c == '{':
		return p.object(depth)
	case c == '[':
		return p.array(depth)
	case c == '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return ast.String(s), nil
	case c == '-' || c >= '0' && c <= '9':
		return p.number()
	case p.literal("true"):
		return ast.Boolean(true), nil
	case p.literal("false"):
		return ast.Boolean(false), nil
	case p.literal("null"):
		return ast.Null{}, nil
	}
	return nil, p.errorf("invalid character %q", p.data[p.i])
}

func (p *jsonParser) literal(lit string) bool {
	if len(p.data)-p.i >= len(lit) && string(p.data[p.i:p.i+len(lit)]) == lit {
		p.i += len(lit)
		return true
	}
	return false
}

func (p *jsonParser) object(depth int) (ast.Value, error) {
	p.i++ // {
	obj := ast.NewObject()
	p.space()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return obj, nil
	}
	for {
		p.space()
		if p.i == len(p.data) || p.data[p.i] != '"' {
			return nil, p.errorf("want a key")
		}
		k, err := p.str()
		if err != nil {
			return nil, err
		}
		if p.space(); p.i == len(p.data) || p.data[p.i] != ':' {
			return nil, p.errorf("want ':'")
		}
		p.i++
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		obj.Insert(ast.StringTerm(k), ast.NewTerm(v)) // a repeated key: the last value wins
		if p.space(); p.i == len(p.data) {
			return nil, p.errorf("unexpected end")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case '}':
			p.i++
			return obj, nil
		default:
			return nil, p.errorf("want ',' or '}'")
		}
	}
}

func (p *jsonParser) array(depth int) (ast.Value, error) {
	p.i++ // [
	var elems []*ast.Term
	p.space()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		return ast.NewArray(), nil
	}
	for {
		v, err := p.value(depth + 1)
		if err != nil {
			return nil, err
		}
		elems = append(elems, ast.NewTerm(v))
		if p.space(); p.i == len(p.data) {
			return nil, p.errorf("unexpected end")
		}
		switch p.data[p.i] {
		case ',':
			p.i++
		case ']':
			p.i++
			return ast.NewArray(elems...), nil
		default:
			return nil, p.errorf("want ',' or ']'")
		}
	}
}

// str reads a string literal. Plain ASCII without escapes is taken as it
// is; anything else goes through encoding/json, so that escapes, invalid
// UTF-8 and surrogates come out exactly as they did.
func (p *jsonParser) str() (string, error) {
	start := p.i
	p.i++ // "
	plain := true
	for p.i < len(p.data) {
		switch c := p.data[p.i]; {
		case c == '"':
			p.i++
			if plain {
				return string(p.data[start+1 : p.i-1]), nil
			}
			var s string
			if err := json.Unmarshal(p.data[start:p.i], &s); err != nil {
				return "", fmt.Errorf("byte %d: %w", start, err)
			}
			return s, nil
		case c == '\\':
			plain = false
			p.i += 2
		case c < 0x20:
			return "", p.errorf("control character in a string")
		case c >= 0x80:
			plain = false
			p.i++
		default:
			p.i++
		}
	}
	return "", p.errorf("unterminated string")
}

// number reads a number literal by JSON's grammar and keeps it as written.
func (p *jsonParser) number() (ast.Value, error) {
	start := p.i
	if p.data[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.data) && p.data[p.i] == '0':
		p.i++
	case p.i < len(p.data) && p.data[p.i] >= '1' && p.data[p.i] <= '9':
		p.digits()
	default:
		return nil, p.errorf("invalid number")
	}
	if p.i < len(p.data) && p.data[p.i] == '.' {
		p.i++
		if p.digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	if p.i < len(p.data) && (p.data[p.i] == 'e' || p.data[p.i] == 'E') {
		p.i++
		if p.i < len(p.data) && (p.data[p.i] == '+' || p.data[p.i] == '-') {
			p.i++
		}
		if p.digits() == 0 {
			return nil, p.errorf("invalid number")
		}
	}
	// As ast.InterfaceToValue reads a json.Number: small integers interned,
	// an exponent out of range refused.
	v, err := ast.InterfaceToValue(json.Number(p.data[start:p.i]))
	if err != nil {
		return nil, fmt.Errorf("byte %d: %w", start, err)
	}
	return v, nil
}

func (p *jsonParser) digits() int {
	n := 0
	for p.i < len(p.data) && p.data[p.i] >= '0' && p.data[p.i] <= '9' {
		p.i++
		n++
	}
	return n
}
