package mcpservers

import (
	"io"
	"strings"
	"testing"
)

// TestBoundedLinesStandsInForAnAnswerPastTheBound: a line past the bound
// that answers a request becomes the stand-in error for the same id,
// wherever the id is in it (the Go SDK writes it first, the TypeScript
// SDK after the result); one that is a request or notification of the
// server's is dropped; lines within the bound pass unchanged.
func TestBoundedLinesStandsInForAnAnswerPastTheBound(t *testing.T) {
	t.Parallel()
	big := `"` + strings.Repeat("x", 300) + `"`
	cases := []struct {
		name, in, want string
	}{
		{"a line within the bound passes", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n", `{"jsonrpc":"2.0","id":1,"result":{}}` + "\n"},
		{"an answer whose id comes first", `{"jsonrpc":"2.0","id":7,"result":{"text":` + big + `}}` + "\n", string(tooLargeAnswer([]byte("7"), 100)) + "\n"},
		{"an answer whose id comes last", `{"result":{"text":` + big + `,"id":99},"jsonrpc":"2.0","id":"a\"b"}` + "\n", string(tooLargeAnswer([]byte(`"a\"b"`), 100)) + "\n"},
		{"a notification is dropped, the next line passes", `{"jsonrpc":"2.0","method":"notifications/message","params":{"data":` + big + `}}` + "\n" + `{"id":2,"result":{}}` + "\n", `{"id":2,"result":{}}` + "\n"},
		{"a request of the server's is dropped", `{"jsonrpc":"2.0","id":3,"method":"sampling/createMessage","params":{"x":` + big + `}}` + "\n", ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			dropped := 0
			b := newBoundedLines(strings.NewReader(c.in), 100, func(string, int) { dropped++ })
			got, err := io.ReadAll(b)
			if err != nil || string(got) != c.want {
				t.Errorf("read %q, %v; want %q", got, err, c.want)
			}
			if (dropped > 0) != (len(c.in) > 100) {
				t.Errorf("%d lines dropped", dropped)
			}
		})
	}
}
