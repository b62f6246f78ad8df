package egress

import (
	"slices"
	"testing"
)

func TestFramerFindsTheConflictingHeadHoweverTheStreamIsSplit(t *testing.T) {
	t.Parallel()
	in := "POST /a HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\n\r\n3;ext=1\r\nabc\r\n2\r\nde\r\n0\r\nX-Trailer: 1\r\n\r\n" +
		"POST /b HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\nfghij" +
		"\r\nGET /c HTTP/1.1\r\nHost: h\r\n\r\n" +
		"POST /d HTTP/1.1\r\nHost: h\r\ncontent-length: 4\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n" +
		"GET /e HTTP/1.1\r\nHost: h\r\n\r\n"
	want := []bool{false, false, false, true, false}
	for step := 1; step <= len(in); step++ {
		f := &h1Framer{}
		for i := 0; i < len(in); i += step {
			f.feed([]byte(in[i:min(i+step, len(in))]))
		}
		if !slices.Equal(f.conflicts, want) || f.state != inHead {
			t.Fatalf("fed %d bytes at a time: conflicts %v, state %d; want %v, at a head", step, f.conflicts, f.state, want)
		}
	}
	// A chunk size it cannot read makes it give up rather than guess.
	f := &h1Framer{}
	f.feed([]byte("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"))
	if f.state != broken {
		t.Errorf("state %d after a bad chunk size; want broken", f.state)
	}
}
