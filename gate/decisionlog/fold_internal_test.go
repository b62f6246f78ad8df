package decisionlog

import (
	"path/filepath"
	"slices"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

type recordWriter struct{ recs []audit.Record }

func (w *recordWriter) Write(r audit.Record) error {
	w.recs = append(w.recs, r)
	return nil
}

// TestAFoldedAnnouncementKeepsItsOwnLines: an announcement of lines 1-5
// (itself line 11) is dropped in turn after lines 6-10 were shipped. The
// new announcement names 1-5 and 11-13, not 1-13: lines 6-10 arrived,
// and naming them again would count them twice at the receiver.
func TestAFoldedAnnouncementKeepsItsOwnLines(t *testing.T) {
	w := &recordWriter{}
	dir := t.TempDir()
	s, err := New(Options{URL: "http://127.0.0.1:1/logs", AuditPath: filepath.Join(dir, "audit.jsonl"), Writer: w,
		Head: func() (int64, string) { return 15, "h15" }, MaxBacklog: 3, Overflow: Drop})
	if err != nil {
		t.Fatal(err)
	}
	batch := []pending{
		{seq: 11, hash: "h11", announced: [][2]int64{{1, 5}}},
		{seq: 12, hash: "h12"}, {seq: 13, hash: "h13"}, {seq: 14, hash: "h14"}, {seq: 15, hash: "h15"},
	}
	cur, rest, err := s.dropOver(nil, Cursor{Seq: 10, Hash: "h10"}, batch, nil)
	if err != nil {
		t.Fatal(err)
	}
	if cur != (Cursor{Seq: 13, Hash: "h13"}) || len(rest) != 2 || rest[0].seq != 14 {
		t.Fatalf("cursor %+v, %d left (first %d); want the cursor at 13 and 14, 15 left", cur, len(rest), rest[0].seq)
	}
	if len(w.recs) != 1 || w.recs[0].Dropped == nil {
		t.Fatalf("records written: %+v, want one announcement", w.recs)
	}
	d := w.recs[0].Dropped
	if want := [][2]int64{{1, 5}, {11, 13}}; !slices.Equal(d.Ranges, want) || d.From != 1 || d.To != 13 || d.Lines != 8 {
		t.Errorf("announcement %+v, want ranges %v, from 1 to 13, 8 lines", d, want)
	}
}

func TestMergeRanges(t *testing.T) {
	got := mergeRanges([][2]int64{{20, 25}, {1, 5}, {6, 9}, {11, 12}, {24, 30}})
	if want := [][2]int64{{1, 9}, {11, 12}, {20, 30}}; !slices.Equal(got, want) {
		t.Errorf("mergeRanges = %v, want %v", got, want)
	}
}
