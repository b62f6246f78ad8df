// Package jsonlex is the one JSON lexer (RFC 8259) under gatekeeper's two
// JSON readers: gate/wire's frame scanner, which checks a frame and finds
// its members, and gate's tool_input reader, which builds the Rego value
// the policy sees. It reads single tokens (white space, a string, a number,
// a literal) at a byte offset and says where each ends; the grammar of
// objects and arrays, nesting limits and keys stay with the readers. Both
// readers therefore accept and refuse exactly the same tokens.
//
// Every function is pure: it reads d and allocates only for an error or,
// in Unquote, for the decoded string.
package jsonlex

import (
	"bytes"
	"encoding/json"
	"fmt"
	"unicode/utf8"
)

// Error is a JSON grammar error at a byte offset of the data read.
type Error struct {
	Msg string
	Off int
}

func (e *Error) Error() string {
	return fmt.Sprintf("%s at byte %d", e.Msg, e.Off)
}

// Space returns the offset of the first byte at or after i that is not
// JSON white space (space, tab, line feed, carriage return), or len(d).
func Space(d []byte, i int) int {
	for i < len(d) {
		switch d[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// String checks the string literal starting at d[i] == '"' and returns the
// offset just past its closing quote and whether it contains escapes. Bytes
// of 0x80 and above are not checked: d[i:end] is a literal JSON accepts
// whether or not it is valid UTF-8.
func String(d []byte, i int) (end int, escaped bool, err error) {
	for j := i + 1; j < len(d); j++ {
		switch c := d[j]; {
		case c == '"':
			return j + 1, escaped, nil
		case c == '\\':
			escaped = true
			j++
			if j == len(d) {
				return 0, false, &Error{"unexpected end of input", j}
			}
			switch d[j] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
			case 'u':
				if j+4 >= len(d) {
					return 0, false, &Error{"unexpected end of input", len(d)}
				}
				for k := j + 1; k <= j+4; k++ {
					if !isHex(d[k]) {
						return 0, false, &Error{"invalid \\u escape", j - 1}
					}
				}
				j += 4
			default:
				return 0, false, &Error{fmt.Sprintf("invalid escape \\%c", d[j]), j - 1}
			}
		case c < 0x20:
			return 0, false, &Error{"control character in string", j}
		}
	}
	return 0, false, &Error{"unexpected end of input", len(d)}
}

// Unquote decodes lit, a string literal String checked (quotes included)
// and whether it had escapes, as encoding/json decodes it: escapes decoded,
// invalid UTF-8 and lone surrogates each becoming U+FFFD. A literal
// without escapes in valid UTF-8 is its own bytes, as encoding/json's own
// fast path finds.
func Unquote(lit []byte, escaped bool) (string, error) {
	body := lit[1 : len(lit)-1]
	if !escaped && utf8.Valid(body) {
		return string(body), nil
	}
	var s string
	if err := json.Unmarshal(lit, &s); err != nil {
		return "", err
	}
	return s, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// Number checks the number starting at d[i] (a '-' or a digit) and
// returns its end.
func Number(d []byte, i int) (int, error) {
	j := i
	if d[j] == '-' {
		j++
	}
	switch {
	case j < len(d) && d[j] == '0':
		j++
	case j < len(d) && '1' <= d[j] && d[j] <= '9':
		j = digits(d, j)
	default:
		return 0, &Error{"invalid number", i}
	}
	if j < len(d) && d[j] == '.' {
		k := digits(d, j+1)
		if k == j+1 {
			return 0, &Error{"invalid number", i}
		}
		j = k
	}
	if j < len(d) && (d[j] == 'e' || d[j] == 'E') {
		j++
		if j < len(d) && (d[j] == '+' || d[j] == '-') {
			j++
		}
		k := digits(d, j)
		if k == j {
			return 0, &Error{"invalid number", i}
		}
		j = k
	}
	return j, nil
}

func digits(d []byte, j int) int {
	for j < len(d) && '0' <= d[j] && d[j] <= '9' {
		j++
	}
	return j
}

// Literal checks that lit ("true", "false" or "null") starts at d[i] and
// returns its end.
func Literal(d []byte, i int, lit string) (int, error) {
	if !bytes.HasPrefix(d[i:], []byte(lit)) {
		return 0, &Error{fmt.Sprintf("invalid literal, want %s", lit), i}
	}
	return i + len(lit), nil
}

// QuoteByte names c for an error message: quoted when printable ASCII,
// else as a hex byte.
func QuoteByte(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return fmt.Sprintf("%q", c)
	}
	return fmt.Sprintf("byte 0x%02x", c)
}
