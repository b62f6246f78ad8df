package audit

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	"slices"
	"strings"
	"unicode/utf8"
)

// Masked replaces every value found under a secret-looking key.
const Masked = "***"

// maxMaskDepth bounds the nesting mask walks through, as encoding/json
// bounds decoding; it also stops a value that contains itself.
const maxMaskDepth = 10000

// isSecretKey reports whether a value under key k must be masked: k,
// lower-cased and with '-' and '_' removed, contains one of these words.
func isSecretKey(k string) bool {
	words := [...]string{
		"password", "passwd", "token", "apikey", "secret", "authorization",
		"credential", "privatekey", "cookie", "sessionid", "accesskey",
	}
	var stack [64]byte
	norm := stack[:0]
	if !isASCII(k) {
		k = strings.ToLower(k)
	}
	for i := 0; i < len(k); i++ {
		c := k[i]
		switch {
		case c == '-' || c == '_':
			continue
		case 'A' <= c && c <= 'Z':
			c += 'a' - 'A'
		}
		norm = append(norm, c)
	}
	for _, w := range words {
		if bytes.Contains(norm, []byte(w)) {
			return true
		}
	}
	return false
}

func isASCII(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return false
		}
	}
	return true
}

// mask returns v with every value under a secret-looking key, at any depth,
// replaced by Masked. It never modifies v: maps and slices on the way to a
// masked value are copied, the rest is shared. map[string]any and []any
// are walked; json.RawMessage, and []byte holding a JSON object or array,
// are decoded, masked and returned decoded; other composite values (structs,
// typed maps and slices, pointers, Marshalers) are round-tripped through
// JSON so that their secrets are masked too; scalars are returned as they
// are.
func mask(v any) (any, error) {
	out, _, err := maskValue(v, 0)
	return out, err
}

// maskValue is mask; changed reports whether out differs from v.
func maskValue(v any, depth int) (out any, changed bool, err error) {
	if depth > maxMaskDepth {
		return nil, false, errTooDeep
	}
	switch x := v.(type) {
	case nil, string, bool, float64, float32, int, int64, int32, uint, uint64, uint32, json.Number:
		return v, false, nil
	case map[string]any:
		return maskMap(x, depth)
	case []any:
		return maskSlice(x, depth)
	case json.RawMessage:
		return maskJSON(x, depth)
	case []byte:
		if t := bytes.TrimLeft(x, " \t\r\n"); len(t) > 0 && (t[0] == '{' || t[0] == '[') && json.Valid(x) {
			return maskJSON(x, depth)
		}
		return v, false, nil
	}
	if _, ok := v.(json.Marshaler); !ok {
		switch reflect.TypeOf(v).Kind() {
		case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct, reflect.Pointer:
		default:
			return v, false, nil
		}
	}
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, false, err
	}
	return maskJSON(raw, depth)
}

func maskMap(m map[string]any, depth int) (any, bool, error) {
	var out map[string]any
	for k, v := range m {
		var nv any = Masked
		if !isSecretKey(k) {
			var changed bool
			var err error
			if nv, changed, err = maskValue(v, depth+1); err != nil {
				return nil, false, err
			}
			if !changed {
				continue
			}
		}
		if out == nil {
			out = maps.Clone(m)
		}
		out[k] = nv
	}
	if out == nil {
		return m, false, nil
	}
	return out, true, nil
}

func maskSlice(s []any, depth int) (any, bool, error) {
	var out []any
	for i, v := range s {
		nv, changed, err := maskValue(v, depth+1)
		if err != nil {
			return nil, false, err
		}
		if !changed {
			continue
		}
		if out == nil {
			out = slices.Clone(s)
		}
		out[i] = nv
	}
	if out == nil {
		return s, false, nil
	}
	return out, true, nil
}

// maskJSON decodes raw (numbers kept exact) and masks the result. It always
// reports a change, since the decoded value replaces raw.
func maskJSON(raw []byte, depth int) (any, bool, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return nil, true, nil
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, false, fmt.Errorf("decode json: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, false, errTrailingData
	}
	out, _, err := maskValue(v, depth+1)
	return out, true, err
}
