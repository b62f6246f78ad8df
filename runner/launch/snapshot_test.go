package launch

import (
	"bufio"
	"io"
	"strings"
	"testing"
)

// TestReadSnapMark reads what can follow a snapshot's tar: the padding and
// mark a launcher writes, and what a program forging its output could.
func TestReadSnapMark(t *testing.T) {
	t.Parallel()
	const tag = "00112233aabbccdd"
	mark := func(code string) string { return "\x1egatekeeper-snap " + tag + " " + code + "\x1e" }
	pad := strings.Repeat("\x00", 9*512)
	tests := []struct {
		name, after, wantErr string // wantErr "" for a good end
	}{
		{name: "padding and the mark end cleanly", after: pad + mark("000")},
		{name: "the mark without padding ends cleanly", after: mark("000")},
		{name: "output after the mark is not read", after: mark("000") + "noise"},
		{name: "tar's failure is the error", after: pad + mark("002"), wantErr: "tar exited 2"},
		{name: "a mark with another tag is malformed", after: "\x1egatekeeper-snap ffffffffffffffff 000\x1e", wantErr: "malformed"},
		{name: "bytes other than padding before the mark are malformed", after: "\x00\x00x" + mark("000"), wantErr: "malformed"},
		{name: "padding longer than a tar record is malformed", after: strings.Repeat("\x00", maxSnapPadding+1) + mark("000"), wantErr: "malformed"},
		{name: "a mark without its code is malformed", after: "\x1egatekeeper-snap " + tag + " 0x0\x1e", wantErr: "malformed"},
		{name: "an end without the mark is an error", after: pad, wantErr: "EOF"},
		{name: "an end inside the mark is an error", after: mark("000")[:10], wantErr: "EOF"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			err := readSnapMark(bufio.NewReader(strings.NewReader(tc.after)), tag)
			switch {
			case tc.wantErr == "" && err != nil:
				t.Errorf("readSnapMark = %v, want a clean end", err)
			case tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)):
				t.Errorf("readSnapMark = %v, want an error saying %q", err, tc.wantErr)
			}
		})
	}
}

// TestSnapshotSink: the sink passes on at most its bound, then fails the
// pipe; an output that ends leaves a still-reading receiver an error; its
// writes never fail.
func TestSnapshotSink(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stream  string
		max     int64
		wantErr string
		want    string
	}{
		{name: "a stream within the bound is passed on, and its end is an error to a receiver still reading", stream: "0123456789", max: 10, want: "0123456789", wantErr: "ended before"},
		{name: "a stream over the bound fails the pipe", stream: "0123456789", max: 9, wantErr: "over 9 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			pr, pw := io.Pipe()
			k := newSnapshotSink(pw, tc.max)
			type read struct {
				data string
				err  error
			}
			got := make(chan read, 1)
			go func() {
				data, err := io.ReadAll(pr)
				got <- read{string(data), err}
			}()
			for i := range len(tc.stream) {
				if n, err := k.Write([]byte(tc.stream[i : i+1])); n != 1 || err != nil {
					t.Fatalf("Write = %d, %v; a sink never fails a write", n, err)
				}
			}
			k.finish()
			r := <-got
			if !strings.HasPrefix(r.data, tc.want) || r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr) {
				t.Errorf("read %q, %v; want %q and an error saying %q", r.data, r.err, tc.want, tc.wantErr)
			}
		})
	}
}
