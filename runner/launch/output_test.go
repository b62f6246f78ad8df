package launch

import (
	"bytes"
	"sync"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/runner"
)

func TestCappedOutput(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var streamed bytes.Buffer
	c := NewCapped(runner.Stdout, 10, func(s runner.Stream, b []byte) {
		mu.Lock()
		defer mu.Unlock()
		if s != runner.Stdout {
			t.Errorf("stream %s, want stdout", s)
		}
		streamed.Write(b)
	})
	for _, chunk := range []string{"hello", " world", "!!!", "more"} {
		n, err := c.Write([]byte(chunk))
		if n != len(chunk) || err != nil {
			t.Fatalf("Write(%q) = %d, %v; want %d, nil (keep draining)", chunk, n, err, len(chunk))
		}
	}
	got, truncated := c.Result()
	if got != "hello worl" || !truncated {
		t.Errorf("result = %q, %v; want %q, true", got, truncated, "hello worl")
	}
	if streamed.String() != "hello worl" {
		t.Errorf("streamed %q, want %q", streamed.String(), "hello worl")
	}
	exact := NewCapped(runner.Stderr, 5, nil)
	exact.Write([]byte("12345"))
	if got, truncated := exact.Result(); got != "12345" || truncated {
		t.Errorf("output exactly at the cap = %q, %v; want not truncated", got, truncated)
	}
}
