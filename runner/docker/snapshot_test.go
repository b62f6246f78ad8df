package docker

import (
	"encoding/base64"
	"io"
	"strings"
	"testing"
)

// TestSnapshotSink feeds the sink what a launcher (or a program forging
// its output) could write after the end mark, in pieces of every size, and
// checks what the receiver reads from the pipe.
func TestSnapshotSink(t *testing.T) {
	t.Parallel()
	const tag = "00112233aabbccdd"
	payload := strings.Repeat("workspace tar bytes ", 40)
	b64 := base64.StdEncoding.EncodeToString([]byte(payload))
	mark := func(code string) string { return "\x1egatekeeper-snap " + tag + " " + code + "\x1e" }
	tests := []struct {
		name    string
		stream  string
		max     int64
		wantErr string // "" for a clean end
	}{
		{name: "a snapshot and its mark end cleanly", stream: b64 + mark("000"), max: 1 << 20},
		{name: "output after the mark is ignored", stream: b64 + mark("000") + "trailing noise", max: 1 << 20},
		{name: "tar's failure is the receiver's error", stream: b64 + mark("002"), max: 1 << 20, wantErr: "tar exited 2"},
		{name: "a mark with another tag is malformed", stream: b64 + "\x1egatekeeper-snap ffffffffffffffff 000\x1e", max: 1 << 20, wantErr: "malformed"},
		{name: "a stray separator is malformed", stream: b64[:20] + "\x1e" + b64[20:] + mark("000"), max: 1 << 20, wantErr: "malformed"},
		{name: "a mark without its code is malformed", stream: b64 + "\x1egatekeeper-snap " + tag + " 0x0\x1e", max: 1 << 20, wantErr: "malformed"},
		{name: "a stream over the bound is cut", stream: b64 + mark("000"), max: int64(len(b64)) - 1, wantErr: "over"},
		{name: "a stream that ends without its mark is incomplete", stream: b64, max: 1 << 20, wantErr: "ended before"},
		{name: "a stream ending inside its mark is incomplete", stream: b64 + mark("000")[:10], max: 1 << 20, wantErr: "ended before"},
	}
	for _, tc := range tests {
		for _, piece := range []int{1, 3, 7, 64, len(tc.stream)} {
			pr, pw := io.Pipe()
			k := newSnapshotSink(tag, pw, tc.max)
			got := make(chan struct {
				data []byte
				err  error
			}, 1)
			go func() {
				data, err := io.ReadAll(pr)
				got <- struct {
					data []byte
					err  error
				}{data, err}
			}()
			for i := 0; i < len(tc.stream); i += piece {
				if n, err := k.Write([]byte(tc.stream[i:min(i+piece, len(tc.stream))])); err != nil || n != min(piece, len(tc.stream)-i) {
					t.Fatalf("%s: Write = %d, %v; a sink never fails a write", tc.name, n, err)
				}
			}
			k.finish()
			r := <-got
			switch {
			case tc.wantErr == "" && (r.err != nil || string(r.data) != b64):
				t.Errorf("%s (pieces of %d): read %d bytes, %v; want the base64 text and a clean end", tc.name, piece, len(r.data), r.err)
			case tc.wantErr != "" && (r.err == nil || !strings.Contains(r.err.Error(), tc.wantErr)):
				t.Errorf("%s (pieces of %d): read error %v, want one saying %q", tc.name, piece, r.err, tc.wantErr)
			}
		}
	}
}
