package wire

import (
	"bytes"
	"fmt"
	"unicode"
	"unicode/utf8"

	"github.com/gatekeeper-ai/gatekeeper/internal/jsonlex"
)

// kind is the JSON type of a value.
type kind uint8

const (
	kindString kind = iota + 1
	kindNumber
	kindBool
	kindNull
	kindObject
	kindArray
	// kindInteger is not a kind the scanner reports: it is what a field
	// wants when it wants a number written without fraction or exponent.
	kindInteger
)

// kindNames is a read-only lookup table for messages.
var kindNames = [...]string{
	kindString:  "a string",
	kindNumber:  "a number",
	kindBool:    "a boolean",
	kindNull:    "null",
	kindObject:  "an object",
	kindArray:   "an array",
	kindInteger: "an integer",
}

func (k kind) String() string {
	if int(k) < len(kindNames) && kindNames[k] != "" {
		return kindNames[k]
	}
	return "nothing"
}

// member is one key of the scanned object's top level and its value.
type member struct {
	// key is the decoded key. It aliases the scanned bytes unless the key
	// contained escapes.
	key []byte
	// raw is the value's exact bytes, aliasing the scanned bytes; nil while
	// the value has not been scanned to its end.
	raw []byte
	// start is the offset of the value in the scanned bytes.
	start int
	// kind is the value's JSON type.
	kind kind
	// escaped reports that a string value contains backslash escapes.
	escaped bool
	// tooDeep reports that the value nests deeper than MaxDepth counting
	// the scanned object itself.
	tooDeep bool
}

// dupKey describes the first repeated key a scan met.
type dupKey struct {
	// key is the key met second; first is the key it repeats (equal to key,
	// or differing only in case).
	key, first string
	// under names the top-level member the repetition is inside; "" when
	// the repetition is among the top-level keys themselves.
	under string
}

// level is an open container within MaxDepth.
type level struct {
	obj bool
	// fold means keys differing only in case count as repeated.
	fold bool
	// base is where this object's keys start in scanner.keys.
	base int
	// set indexes the keys once the object has many; nil until then.
	set map[string]struct{}
}

// smallObject is how many keys an object may have before its duplicate
// check switches from a linear scan to a map.
const smallObject = 16

// scanner checks that data is exactly one JSON object (RFC 8259) and walks
// all of it, collecting the top-level members and the first repeated key.
// Keys are tracked in every object within MaxDepth; an object deeper than
// that marks its top-level member tooDeep and its keys are not tracked.
// A scanner is used once, by one goroutine.
type scanner struct {
	data []byte
	// foldTop makes keys of the top-level object fold-compared; foldChild
	// names a top-level member whose object value is fold-compared too.
	foldTop   bool
	foldChild string

	members []member
	dup     *dupKey

	levels []level  // open containers at depth 1..MaxDepth
	deep   []bool   // open containers beyond MaxDepth: true for objects
	keys   [][]byte // keys of the open objects within MaxDepth, innermost last

	// Backing arrays that make a typical frame cost one allocation.
	memberBuf [10]member
	levelBuf  [4]level
	keyBuf    [16][]byte
}

// depth is the number of open containers.
func (s *scanner) depth() int { return len(s.levels) + len(s.deep) }

// scan walks s.data. It returns a *jsonlex.Error when data is not exactly one
// JSON object; s.members holds the members scanned before the error.
// data must be valid UTF-8: strings are not checked for it.
func (s *scanner) scan() error {
	s.members, s.levels, s.deep, s.keys = s.memberBuf[:0], s.levelBuf[:0], nil, s.keyBuf[:0]
	d := s.data
	i := jsonlex.Space(d, 0)
	if i == len(d) {
		return &jsonlex.Error{Msg: "no JSON object", Off: i}
	}
	if d[i] != '{' {
		return &jsonlex.Error{Msg: "not a JSON object", Off: i}
	}
	const (
		wantValue  = iota // a value starts at i
		wantKey           // a key starts at i (after '{' or ',')
		afterValue        // a value ended at i
	)
	state := wantValue
	for {
		switch state {
		case wantValue:
			if i == len(d) {
				return &jsonlex.Error{Msg: "unexpected end of input", Off: i}
			}
			top := len(s.levels) == 1 && len(s.deep) == 0
			if top {
				m := &s.members[len(s.members)-1]
				m.kind, m.start = kindOf(d[i]), i
			}
			var end int
			var err error
			switch c := d[i]; {
			case c == '{' || c == '[':
				s.push(c == '{')
				i = jsonlex.Space(d, i+1)
				if i < len(d) && d[i] == closer(c) {
					s.pop()
					i++
					state = afterValue
				} else if c == '{' {
					state = wantKey
				}
				continue
			case c == '"':
				var esc bool
				end, esc, err = jsonlex.String(d, i)
				if top {
					s.members[len(s.members)-1].escaped = esc
				}
			case c == '-' || '0' <= c && c <= '9':
				end, err = jsonlex.Number(d, i)
			case c == 't':
				end, err = jsonlex.Literal(d, i, "true")
			case c == 'f':
				end, err = jsonlex.Literal(d, i, "false")
			case c == 'n':
				end, err = jsonlex.Literal(d, i, "null")
			default:
				return &jsonlex.Error{Msg: fmt.Sprintf("unexpected %s", jsonlex.QuoteByte(c)), Off: i}
			}
			if err != nil {
				return err
			}
			i = end
			state = afterValue
		case wantKey:
			if i == len(d) {
				return &jsonlex.Error{Msg: "unexpected end of input", Off: i}
			}
			if d[i] != '"' {
				return &jsonlex.Error{Msg: fmt.Sprintf("unexpected %s, want a key", jsonlex.QuoteByte(d[i])), Off: i}
			}
			end, esc, err := jsonlex.String(d, i)
			if err != nil {
				return err
			}
			key := d[i+1 : end-1]
			if esc {
				key = unescape(d[i:end])
			}
			s.addKey(key)
			i = jsonlex.Space(d, end)
			if i == len(d) || d[i] != ':' {
				return &jsonlex.Error{Msg: "missing ':' after key", Off: i}
			}
			i = jsonlex.Space(d, i+1)
			if len(s.levels) == 1 && len(s.deep) == 0 {
				s.members = append(s.members, member{key: key})
			}
			state = wantValue
		case afterValue:
			depth := s.depth()
			if depth == 0 {
				if i = jsonlex.Space(d, i); i != len(d) {
					return &jsonlex.Error{Msg: "trailing data after the object", Off: i}
				}
				return nil
			}
			if depth == 1 {
				m := &s.members[len(s.members)-1]
				m.raw = d[m.start:i]
			}
			i = jsonlex.Space(d, i)
			if i == len(d) {
				return &jsonlex.Error{Msg: "unexpected end of input", Off: i}
			}
			obj := s.topIsObject()
			switch c := d[i]; {
			case c == ',':
				i = jsonlex.Space(d, i+1)
				if obj {
					state = wantKey
				} else {
					state = wantValue
				}
			case obj && c == '}' || !obj && c == ']':
				s.pop()
				i++
			default:
				return &jsonlex.Error{Msg: fmt.Sprintf("unexpected %s after a value", jsonlex.QuoteByte(c)), Off: i}
			}
		}
	}
}

// topIsObject reports whether the innermost open container is an object.
func (s *scanner) topIsObject() bool {
	if n := len(s.deep); n > 0 {
		return s.deep[n-1]
	}
	return s.levels[len(s.levels)-1].obj
}

// push opens a container; an object within MaxDepth gets a key set.
func (s *scanner) push(obj bool) {
	if len(s.deep) > 0 || len(s.levels) == MaxDepth {
		if len(s.deep) == 0 {
			// The first level beyond MaxDepth: the frame nests too deep
			// inside the current top-level member.
			s.members[len(s.members)-1].tooDeep = true
		}
		s.deep = append(s.deep, obj)
		return
	}
	fold := false
	switch len(s.levels) {
	case 0:
		fold = s.foldTop
	case 1:
		fold = s.foldChild != "" && string(s.members[len(s.members)-1].key) == s.foldChild
	}
	s.levels = append(s.levels, level{obj: obj, fold: fold && obj, base: len(s.keys)})
}

// pop closes the innermost container.
func (s *scanner) pop() {
	if n := len(s.deep); n > 0 {
		s.deep = s.deep[:n-1]
		return
	}
	l := s.levels[len(s.levels)-1]
	s.keys = s.keys[:l.base]
	s.levels = s.levels[:len(s.levels)-1]
}

// addKey records key in the innermost object within MaxDepth and notes
// the first repetition.
func (s *scanner) addKey(key []byte) {
	if len(s.deep) > 0 {
		return
	}
	l := &s.levels[len(s.levels)-1]
	if s.dup == nil {
		if first, ok := l.find(s.keys[l.base:], key); ok {
			under := ""
			if len(s.levels) > 1 {
				under = string(s.members[len(s.members)-1].key)
			}
			s.dup = &dupKey{key: string(key), first: string(first), under: under}
		}
	}
	s.keys = append(s.keys, key)
	if l.set != nil {
		l.set[l.index(key)] = struct{}{}
	} else if len(s.keys)-l.base > smallObject {
		l.set = make(map[string]struct{}, 2*smallObject)
		for _, k := range s.keys[l.base:] {
			l.set[l.index(k)] = struct{}{}
		}
	}
}

// find reports whether key repeats one of keys, returning the earlier key.
func (l *level) find(keys [][]byte, key []byte) ([]byte, bool) {
	if l.set != nil {
		if _, ok := l.set[l.index(key)]; !ok {
			return nil, false
		}
		// Rare: report which earlier key it was.
	}
	for _, k := range keys {
		if bytes.Equal(k, key) || l.fold && bytes.EqualFold(k, key) {
			return k, true
		}
	}
	return nil, false
}

// index is the map key under which key is stored: the key itself, or its
// case-folded form when the level folds.
func (l *level) index(key []byte) string {
	if !l.fold {
		return string(key)
	}
	return foldKey(key)
}

// foldKey maps every rune of key to the smallest rune of its simple case
// folding orbit, so that two keys are equal under bytes.EqualFold exactly
// when their foldKey values are equal.
func foldKey(key []byte) string {
	b := make([]byte, 0, len(key))
	for _, r := range string(key) {
		m := r
		for f := unicode.SimpleFold(r); f != r; f = unicode.SimpleFold(f) {
			m = min(m, f)
		}
		b = utf8.AppendRune(b, m)
	}
	return string(b)
}

// unescape decodes a scanned JSON string literal that contains escapes.
func unescape(lit []byte) []byte {
	s, err := jsonlex.Unquote(lit, true)
	if err != nil {
		// Unreachable: lit was checked by jsonlex.String.
		return lit
	}
	return []byte(s)
}

func kindOf(c byte) kind {
	switch c {
	case '{':
		return kindObject
	case '[':
		return kindArray
	case '"':
		return kindString
	case 't', 'f':
		return kindBool
	case 'n':
		return kindNull
	}
	return kindNumber
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}
