package wire

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
)

// Encode returns the text frame for v: one JSON object, "type" first, then
// the fields in the order of docs/protocol.md. Strings that are not valid
// UTF-8 (such as Output.Data cut mid-rune) have each invalid byte replaced by
// U+FFFD; '<', '>' and '&' are not escaped. Encode fails with ErrNilReply for
// a nil v and with a wrapped error when a field cannot be marshalled (such as
// a QueryOpened.EffectivePolicy holding a channel).
func Encode(v Reply) ([]byte, error) {
	if v == nil {
		return nil, ErrNilReply
	}
	var b []byte
	var err error
	if m, ok := v.(json.Marshaler); ok && reflect.TypeOf(v).Kind() != reflect.Pointer {
		// A frame's MarshalJSON writes it whole with marshal already;
		// through marshal again, encoding/json would only compact and
		// check what it has just written.
		b, err = m.MarshalJSON()
	} else {
		b, err = marshal(v)
	}
	if err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", v.Type(), err)
	}
	if string(b) == "null" { // a nil pointer
		return nil, ErrNilReply
	}
	return b, nil
}

// marshal is json.Marshal without HTML escaping.
func marshal(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n")), nil
}

// marshalFrame marshals fields, a struct whose first JSON field is always
// written, and puts "type":typ in front of it.
func marshalFrame(typ string, fields any) ([]byte, error) {
	b, err := marshal(fields)
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, len(b)+len(typ)+10)
	out = append(out, `{"type":"`...)
	out = append(out, typ...)
	out = append(out, `",`...)
	return append(out, b[1:]...), nil
}
