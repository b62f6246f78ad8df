package console

import (
	"context"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// BenchmarkAuditWrite compares a decision's audit write alone with the
// same write through the console's tee while the console follows the log
// and one live stream takes every record: what the console adds to a
// decision (write-ns: the time in Write; ns/op includes the pacing). The
// console case also reports how long a record takes from Write returning
// to the stream (p50 and p99, in µs).
func BenchmarkAuditWrite(b *testing.B) {
	rec := audit.Record{Kind: audit.KindDecision, QueryID: "q_bench", Tool: "Read", Event: "PreToolUse", Decision: "deny",
		Rule: "host_fs.deny_glob", Reason: "Read of ~/.ssh/id_rsa is forbidden", ToolInput: map[string]any{"file_path": "~/.ssh/id_rsa"}}
	open := func(b *testing.B) (*audit.Log, string) {
		path := filepath.Join(b.TempDir(), "audit.jsonl")
		l, err := audit.Open(path, audit.Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { l.Close() })
		return l, path
	}
	b.Run("alone", func(b *testing.B) {
		l, _ := open(b)
		var took time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := l.Write(rec); err != nil {
				b.Fatal(err)
			}
			took += time.Since(t0)
			time.Sleep(time.Microsecond) // paced as below
		}
		b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "write-ns")
	})
	b.Run("console", func(b *testing.B) {
		l, path := open(b)
		h := newHub(path, 20000, 64<<20, time.Second)
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		go h.run(ctx)
		if h.waitLoaded(ctx) != nil {
			b.Fatal("not loaded")
		}
		_, s, _ := h.subscribe(Filter{}, nil, 0)
		sent := make(chan time.Time, 1<<20)
		var lat []time.Duration
		done := make(chan struct{})
		go func() {
			defer close(done)
			for range s.ch {
				lat = append(lat, time.Since(<-sent))
			}
		}()
		w := tee{inner: l, h: h}
		var took time.Duration
		for b.Loop() {
			t0 := time.Now()
			if err := w.Write(rec); err != nil {
				b.Fatal(err)
			}
			now := time.Now()
			took += now.Sub(t0)
			sent <- now
			// Pace the writes, one in flight, so that the latency measured
			// is the console's and not a queue's.
			for len(sent) > 0 && !s.lagged {
				time.Sleep(time.Microsecond)
			}
		}
		b.ReportMetric(float64(took.Nanoseconds())/float64(b.N), "write-ns")
		b.StopTimer()
		lagged := s.lagged
		h.unsubscribe(s)
		<-done
		if lagged {
			b.Fatal("the stream fell behind and was dropped")
		}
		slices.Sort(lat)
		if len(lat) > 0 {
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs-to-stream")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs-to-stream")
		}
	})
}
