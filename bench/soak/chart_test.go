package soak

import (
	"bytes"
	"encoding/xml"
	"io"
	"strings"
	"testing"
	"time"
)

// wellFormed parses svg as XML to its end.
func wellFormed(t *testing.T, svg []byte) {
	t.Helper()
	d := xml.NewDecoder(bytes.NewReader(svg))
	for {
		if _, err := d.Token(); err == io.EOF {
			return
		} else if err != nil {
			t.Fatalf("not well-formed XML: %v", err)
		}
	}
}

func TestTheChartsNameEveryFaultAndParse(t *testing.T) {
	t.Parallel()
	s := judged()
	var recs []Record
	for i := range 400 {
		sent := float64(i) / 4
		recs = append(recs, rec("decide", "bash", sent, sent+0.001*float64(1+i%7), decision("deny", "tools.deny_list", "sha256:base", "")))
	}
	end := s.begin.Add(100 * time.Second)
	r := &Results{Profile: "test", Generated: "now", Seconds: 100, Windows: s.windows, begin: s.begin, samples: recs}
	r.Timeline = []Sample{{At: s.begin.Add(time.Second), RSS: 30 << 20, Goroutines: 24}, {At: s.begin.Add(50 * time.Second), RSS: 40 << 20, Goroutines: 30}}
	r.Phases, r.byPhase = s.phases(recs, end)
	for name, svg := range map[string][]byte{"timeline": r.Chart(), "latency": r.LatencyChart()} {
		wellFormed(t, svg)
		for _, w := range s.windows {
			if !strings.Contains(string(svg), w.Name) {
				t.Errorf("the %s chart does not name %q", name, w.Name)
			}
		}
	}
}
