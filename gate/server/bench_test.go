package server_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// BenchmarkDecideOverSocket measures one decide round trip over the real
// Unix socket, WebSocket and audit log, one request at a time, and reports
// the p50 and p99 latencies.
func BenchmarkDecideOverSocket(b *testing.B) {
	h := start(b, options{})
	c := h.connect(b)
	q := c.open("")
	frame := []byte(fmt.Sprintf(`{"type":"decide","id":"b","query_id":%q,"event":"PreToolUse","tool_name":"Read","tool_input":{"file_path":%q},"tool_use_id":"toolu_1"}`, q, h.dir+"/ws/a.txt"))
	lat := make([]time.Duration, 0, b.N)
	b.ResetTimer()
	for b.Loop() {
		t0 := time.Now()
		if err := c.ws.WriteMessage(websocket.TextMessage, frame); err != nil {
			b.Fatal(err)
		}
		if _, _, err := c.ws.ReadMessage(); err != nil {
			b.Fatal(err)
		}
		lat = append(lat, time.Since(t0))
	}
	b.StopTimer()
	slices.Sort(lat)
	if len(lat) > 0 {
		b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
		b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
	}
}
