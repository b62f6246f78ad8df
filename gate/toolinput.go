package gate

import (
	"encoding/json"
	"errors"
	"fmt"

	"github.com/open-policy-agent/opa/v1/ast"

	"github.com/gatekeeper-ai/gatekeeper/internal/jsonlex"
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

// jsonParser is a recursive-descent JSON reader producing ast values. Its
// tokens are read by jsonlex, as gate/wire's frame scanner reads them.
type jsonParser struct {
	data []byte
	i    int
}

func (p *jsonParser) space() { p.i = jsonlex.Space(p.data, p.i) }

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
	switch c := p.data[p.i]; c {
	case '{':
		return p.object(depth)
	case '[':
		return p.array(depth)
	case '"':
		s, err := p.str()
		if err != nil {
			return nil, err
		}
		return ast.String(s), nil
	case 't':
		return p.literal("true", ast.Boolean(true))
	case 'f':
		return p.literal("false", ast.Boolean(false))
	case 'n':
		return p.literal("null", ast.Null{})
	case '-', '0', '1', '2', '3', '4', '5', '6', '7', '8', '9':
		return p.number()
	}
	return nil, p.errorf("invalid character %q", p.data[p.i])
}

// literal reads lit, whose value is v.
func (p *jsonParser) literal(lit string, v ast.Value) (ast.Value, error) {
	end, err := jsonlex.Literal(p.data, p.i, lit)
	if err != nil {
		return nil, err
	}
	p.i = end
	return v, nil
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

// str reads a string literal, unquoted as encoding/json unquotes it.
func (p *jsonParser) str() (string, error) {
	start := p.i
	end, escaped, err := jsonlex.String(p.data, start)
	if err != nil {
		return "", err
	}
	p.i = end
	s, err := jsonlex.Unquote(p.data[start:end], escaped)
	if err != nil {
		return "", fmt.Errorf("byte %d: %w", start, err)
	}
	return s, nil
}

// number reads a number literal by JSON's grammar and keeps it as written.
func (p *jsonParser) number() (ast.Value, error) {
	start := p.i
	end, err := jsonlex.Number(p.data, start)
	if err != nil {
		return nil, err
	}
	p.i = end
	// As ast.InterfaceToValue reads a json.Number: small integers interned,
	// an exponent out of range refused.
	v, err := ast.InterfaceToValue(json.Number(p.data[start:end]))
	if err != nil {
		return nil, fmt.Errorf("byte %d: %w", start, err)
	}
	return v, nil
}
