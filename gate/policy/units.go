package policy

import (
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"
)

// ByteSize is a size in bytes. In YAML and in JSON overrides it is written
// with a binary unit ("512m", "1g", "64Mi", "2GiB", "4096"); in JSON output it
// is a plain number of bytes.
type ByteSize int64

var byteUnits = []struct {
	suffix string
	shift  uint
}{
	{"kib", 10}, {"mib", 20}, {"gib", 30}, {"tib", 40},
	{"ki", 10}, {"mi", 20}, {"gi", 30}, {"ti", 40},
	{"kb", 10}, {"mb", 20}, {"gb", 30}, {"tb", 40},
	{"k", 10}, {"m", 20}, {"g", 30}, {"t", 40},
	{"b", 0},
}

// ParseByteSize parses a size such as "512m" or "1GiB"; every unit is binary.
func ParseByteSize(s string) (ByteSize, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	if t == "" {
		return 0, fmt.Errorf("empty size")
	}
	shift := uint(0)
	for _, u := range byteUnits {
		if strings.HasSuffix(t, u.suffix) {
			t, shift = strings.TrimSpace(strings.TrimSuffix(t, u.suffix)), u.shift
			break
		}
	}
	n, err := strconv.ParseInt(t, 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("size %q is not a whole number with an optional unit (k, m, g, t)", s)
	}
	if n > math.MaxInt64>>shift {
		return 0, fmt.Errorf("size %q is too large", s)
	}
	return ByteSize(n << shift), nil
}

// String renders the size with the largest binary unit that divides it.
func (b ByteSize) String() string {
	n := int64(b)
	for _, u := range []struct {
		s     string
		shift uint
	}{{"t", 40}, {"g", 30}, {"m", 20}, {"k", 10}} {
		if n != 0 && n%(1<<u.shift) == 0 {
			return strconv.FormatInt(n>>u.shift, 10) + u.s
		}
	}
	return strconv.FormatInt(n, 10)
}

// UnmarshalYAML accepts a string with a unit or a plain integer of bytes.
func (b *ByteSize) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a size such as 256m", n.Line)
	}
	v, err := ParseByteSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*b = v
	return nil
}

// MarshalJSON writes the number of bytes.
func (b ByteSize) MarshalJSON() ([]byte, error) { return []byte(strconv.FormatInt(int64(b), 10)), nil }

// UnmarshalJSON accepts a number of bytes or a string with a unit.
func (b *ByteSize) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		v, err := ParseByteSize(s)
		*b = v
		return err
	}
	var n int64
	if err := json.Unmarshal(data, &n); err != nil || n < 0 {
		return fmt.Errorf("size must be a non-negative integer of bytes or a string such as \"256m\"")
	}
	*b = ByteSize(n)
	return nil
}

// Duration is a length of time. In YAML and JSON overrides it is written as
// Go durations ("10s", "1m30s") or a number of milliseconds; in JSON output it
// is a number of milliseconds.
type Duration time.Duration

// ParseDuration parses "10s", "1m30s" or a plain number of milliseconds.
func ParseDuration(s string) (Duration, error) {
	t := strings.TrimSpace(s)
	if ms, err := strconv.ParseInt(t, 10, 64); err == nil && ms >= 0 && ms <= math.MaxInt64/int64(time.Millisecond) {
		return Duration(time.Duration(ms) * time.Millisecond), nil
	}
	d, err := time.ParseDuration(t)
	if err != nil || d < 0 {
		return 0, fmt.Errorf("duration %q is not a duration such as 10s or 1m30s", s)
	}
	return Duration(d), nil
}

// Std returns the time.Duration.
func (d Duration) Std() time.Duration { return time.Duration(d) }

// String renders the duration the way Go does ("10s").
func (d Duration) String() string { return time.Duration(d).String() }

// UnmarshalYAML accepts a Go duration string or milliseconds.
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: expected a duration such as 10s", n.Line)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = v
	return nil
}

// MarshalJSON writes whole milliseconds.
func (d Duration) MarshalJSON() ([]byte, error) {
	return []byte(strconv.FormatInt(time.Duration(d).Milliseconds(), 10)), nil
}

// UnmarshalJSON accepts milliseconds or a duration string.
func (d *Duration) UnmarshalJSON(data []byte) error {
	var s string
	if json.Unmarshal(data, &s) == nil {
		v, err := ParseDuration(s)
		*d = v
		return err
	}
	var ms int64
	if err := json.Unmarshal(data, &ms); err != nil || ms < 0 {
		return fmt.Errorf("duration must be a non-negative integer of milliseconds or a string such as \"10s\"")
	}
	*d = Duration(time.Duration(ms) * time.Millisecond)
	return nil
}
