package console

import (
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// line is an audit line of seq n, line n of its file (the chain is not
// what these tests are about).
func line(n int64, tool string) audit.Line {
	return audit.Line{Number: int(n), Text: fmt.Appendf(nil, `{"seq":%d,"time":"2026-01-02T03:04:05Z","prev":"x","kind":"decision","tool":%q,"decision":"deny"}`, n, tool)}
}

func TestASlowSubscriberIsDroppedAndResumesFromTheHistory(t *testing.T) {
	t.Parallel()
	h := newHub("unused", 10*subBuffer, 1<<30, time.Hour)
	_, slow, _ := h.subscribe(Filter{}, nil, 0)
	_, quick, _ := h.subscribe(Filter{Tools: []string{"T0"}}, nil, 0)
	h.mu.Lock()
	for n := int64(1); n <= subBuffer+5; n++ {
		h.add(line(n, "T"+fmt.Sprint(n%2)))
	}
	h.mu.Unlock()
	var got []int64
	for e := range slow.ch {
		got = append(got, e.rec.Seq)
	}
	if !slow.lagged || len(got) != subBuffer || got[len(got)-1] != subBuffer {
		t.Fatalf("slow subscriber: lagged %v after %d records (last %d), want dropped after the first %d", slow.lagged, len(got), got[len(got)-1], subBuffer)
	}
	if quick.lagged || len(quick.ch) != (subBuffer+5)/2 {
		t.Errorf("a subscriber keeping up was dropped too or missed records: lagged %v, %d queued", quick.lagged, len(quick.ch))
	}
	// It reconnects with the last id it saw and gets the rest, in order.
	rest, again, gap := h.subscribe(Filter{}, &eventID{0, subBuffer}, 0)
	defer h.unsubscribe(again)
	if gap || len(rest) != 5 || rest[0].rec.Seq != subBuffer+1 {
		t.Fatalf("resume: %d records from seq %d (gap %v), want the 5 after %d", len(rest), rest[0].rec.Seq, gap, subBuffer)
	}
	h.unsubscribe(quick)
}

func TestTheHistoryIsBoundedByCountAndBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name       string
		maxRecords int
		maxBytes   int64
		want       int
	}{
		{"by count", 3, 1 << 30, 3},
		{"by bytes", 1000, 3 * (&entry{raw: line(10, "T").Text, hay: haystack(&audit.Record{Kind: "decision", Tool: "T", Decision: "deny"})}).size(), 3},
		{"one record always stays", 1000, 1, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHub("unused", tc.maxRecords, tc.maxBytes, time.Hour)
			h.mu.Lock()
			for n := int64(1); n <= 10; n++ {
				h.add(line(n, "T"))
			}
			h.mu.Unlock()
			hs, _ := h.status()
			if hs.Records != tc.want || hs.LastSeq != 10 || hs.FirstSeq != int64(11-tc.want) {
				t.Fatalf("history %+v, want the newest %d records", hs, tc.want)
			}
			back, s, gap := h.subscribe(Filter{}, &eventID{0, 2}, 0)
			h.unsubscribe(s)
			if !gap || len(back) != tc.want {
				t.Fatalf("resuming after seq 2: %d records, gap %v; want the %d held and a gap", len(back), gap, tc.want)
			}
		})
	}
}

func TestANewLogAtThePathStartsANewHistory(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	path := dir + "/audit.jsonl"
	write := func(recs ...string) {
		l, err := audit.Open(path, audit.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer l.Close()
		for _, tool := range recs {
			if err := l.Write(audit.Record{Kind: audit.KindDecision, Tool: tool, Decision: "deny"}); err != nil {
				t.Fatal(err)
			}
		}
	}
	write("A", "B")
	h := newHub(path, 100, 1<<20, time.Hour)
	fl := h.follower()
	defer fl.Close()
	h.drain(fl)
	// The old log gets one more line, then is rotated away; a new log
	// starts at seq 1 with two lines.
	write("C")
	if err := os.Rename(path, path+".1"); err != nil {
		t.Fatal(err)
	}
	write("D", "E")
	h.drain(fl)
	hs, cs := h.status()
	back, s, _ := h.subscribe(Filter{}, nil, 100)
	h.unsubscribe(s)
	var tools []string
	for _, e := range back {
		tools = append(tools, e.rec.Tool)
	}
	if fmt.Sprint(tools) != "[D E]" || hs.FirstSeq != 1 || cs.Break != nil || cs.Lines != 2 || h.epoch != 1 {
		t.Fatalf("after the rotation: history %v %+v, chain %+v, epoch %d; want the new log's D and E, a chain of 2, epoch 1", tools, hs, cs, h.epoch)
	}
}
