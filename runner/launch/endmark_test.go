package launch

import (
	"bytes"
	"fmt"
	"strings"
	"testing"
)

func TestEndMarks(t *testing.T) {
	t.Parallel()
	const tag = "0123456789abcdef"
	mark := func(code string) string { return "\x1egatekeeper-end " + tag + " " + code + "\x1e" }
	tests := []struct {
		name    string
		writes  []string // to stdout; stderr gets "err" and a mark
		out     string   // what stdout passes on
		marked  bool     // stdout's mark was found
		code    int
		codeOK  bool
		errCode string // stderr's mark; empty: the same code as stdout's
	}{
		{name: "output and its mark", writes: []string{"hello\n" + mark("000")}, out: "hello\n", marked: true, code: 0, codeOK: true},
		{name: "a mark split byte by byte", writes: strings.Split("hi"+mark("003"), ""), out: "hi", marked: true, code: 3, codeOK: true},
		{name: "a mark split inside its tag", writes: []string{"x\x1egatekeeper-end 0123", "456789abcdef 042\x1e"}, out: "x", marked: true, code: 42, codeOK: true},
		{name: "what follows the mark is dropped", writes: []string{"a" + mark("001") + "forged after", "more"}, out: "a", marked: true, code: 1, codeOK: true},
		{name: "no mark: everything passes", writes: []string{"plain \x1e", "text\x1egatekeeper-end"}, out: "plain \x1etext\x1egatekeeper-end"},
		{name: "another tag is output", writes: []string{"\x1egatekeeper-end ffffffffffffffff 000\x1e"}, out: "\x1egatekeeper-end ffffffffffffffff 000\x1e"},
		{name: "a malformed code is output", writes: []string{"\x1egatekeeper-end " + tag + " 0x0\x1e" + mark("000")}, out: "\x1egatekeeper-end " + tag + " 0x0\x1e", marked: true, codeOK: true},
		{name: "a code over 255 is output", writes: []string{mark("256")}, out: mark("256")},
		{name: "a lead cut off at the end is output", writes: []string{"y\x1egatekeeper-end " + tag + " 00"}, out: "y\x1egatekeeper-end " + tag + " 00"},
		{name: "marks that disagree leave the code to the engine", writes: []string{mark("007")}, out: "", marked: true, code: 0, codeOK: false, errCode: "009"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := NewEndMarks(tag)
			var out, errOut bytes.Buffer
			so, se := m.Stream(&out, nil), m.Stream(&errOut, nil)
			for _, w := range tt.writes {
				if n, err := so.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write = %d, %v", n, err)
				}
			}
			errCode := tt.errCode
			if errCode == "" {
				errCode = fmt.Sprintf("%03d", tt.code)
			}
			se.Write([]byte("err" + mark(errCode)))
			so.Flush()
			se.Flush()
			if out.String() != tt.out {
				t.Errorf("stdout passed on %q; want %q", out.String(), tt.out)
			}
			if errOut.String() != "err" {
				t.Errorf("stderr passed on %q; want %q", errOut.String(), "err")
			}
			select {
			case <-m.Ended():
				if !tt.marked {
					t.Errorf("ended without stdout's mark")
				}
			default:
				if tt.marked {
					t.Errorf("not ended after both marks")
				}
			}
			if code, ok := m.ExitCode(); tt.marked && (code != tt.code || ok != tt.codeOK) {
				t.Errorf("exitCode = %d, %v; want %d, %v", code, ok, tt.code, tt.codeOK)
			}
		})
	}
}

func TestRunTagsDiffer(t *testing.T) {
	t.Parallel()
	a, b := NewTag(), NewTag()
	if len(a) != 16 || strings.Trim(a, "0123456789abcdef") != "" || a == b {
		t.Errorf("tags %q and %q: want two different 16-digit hex strings", a, b)
	}
}
