package console_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// smallFiles rotates after about two decision lines.
var smallFiles = audit.Options{MaxBytes: 600}

// chainView is the overview's chain, as the page reads it.
type chainView struct {
	State    string `json:"state"`
	Lines    int    `json:"lines"`
	FirstSeq int64  `json:"first_seq"`
	LastSeq  int64  `json:"last_seq"`
	Break    any    `json:"break"`
}

// setLines reads the rotated log at path, oldest line first.
func setLines(t *testing.T, path string) []string {
	t.Helper()
	files, err := audit.Files(path)
	must(t, err)
	var out []string
	for l, err := range audit.Lines(files) {
		must(t, err)
		out = append(out, string(l.Text))
	}
	return out
}

// held returns the audit lines the console holds, oldest first.
func (h *harness) held(t *testing.T) []string {
	t.Helper()
	var got struct {
		Records []struct {
			Line json.RawMessage `json:"line"`
		} `json:"records"`
	}
	must(t, json.NewDecoder(h.do(t, "GET", "/ui/api/records?limit=100000", map[string]string{"Authorization": "Bearer " + token}, "").Body).Decode(&got))
	out := make([]string, len(got.Records))
	for i, r := range got.Records {
		out[i] = string(r.Line)
	}
	return out
}

func TestTheHistoryIsTheNewestLinesOfTheRotatedSet(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, smallFiles)
	must(t, err)
	for i := range 30 {
		must(t, l.Write(decision(fmt.Sprintf("T%d", i), "deny", "r")))
	}
	must(t, l.Close())
	files, err := audit.Files(path)
	must(t, err)
	if len(files) < 10 {
		t.Fatalf("the set has %d files; the test wants many rotations", len(files))
	}
	all := setLines(t, path)
	// The oldest file is far older than the history holds: the console
	// must not read it, so junk in it changes nothing.
	must(t, os.WriteFile(files[0].Path, []byte("not an audit line\n"), 0o600))

	h := start(t, options{audit: path, maxRecords: 10})
	h.waitRecords(t, 1)
	got := h.held(t)
	want := all[len(all)-10:]
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("the console holds\n%s\nwant the set's newest 10 lines, across its files, in order:\n%s", got, want)
	}
	var o struct {
		Chain chainView `json:"chain"`
	}
	h.overview(t, &o)
	var first, last audit.Record
	must(t, json.Unmarshal([]byte(want[0]), &first))
	must(t, json.Unmarshal([]byte(want[9]), &last))
	if o.Chain.State != "ok" || o.Chain.Lines != 10 || o.Chain.FirstSeq != first.Seq || o.Chain.LastSeq != last.Seq {
		t.Fatalf("chain %+v, want ok over the 10 lines read, seq %d-%d", o.Chain, first.Seq, last.Seq)
	}
}

func TestTheConsoleFollowsRotationsWithoutLosingOrRepeatingALine(t *testing.T) {
	t.Parallel()
	h := start(t, options{auditOpts: smallFiles, maxRecords: 100000})
	h.write(t, decision("first", "deny", "r"))
	h.waitRecords(t, 1)
	// A generous bound: if it is ever reached, lines were lost.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", h.srv.URL+"/ui/api/stream?limit=100000", nil)
	must(t, err)
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := h.srv.Client().Do(req)
	must(t, err)
	defer resp.Body.Close()
	s := sse{bufio.NewReader(resp.Body)}

	const n = 300
	written := make(chan error, 1)
	go func() {
		for i := range n {
			if err := h.log.Write(decision(fmt.Sprintf("T%d", i), "deny", "r")); err != nil {
				written <- err
				return
			}
		}
		written <- nil
	}()
	var seqs []int64
	var last int64
	for {
		ev := s.next(t)
		if ev.name != "record" {
			continue
		}
		_, rec := ev.record(t)
		seqs = append(seqs, rec.Seq)
		if rec.Kind == audit.KindDecision && rec.Tool == fmt.Sprintf("T%d", n-1) {
			last = rec.Seq
			break
		}
	}
	must(t, <-written)
	for i, seq := range seqs {
		if seq != int64(i+1) {
			t.Fatalf("the stream gave seq %d where %d was due (%d records in)", seq, i+1, i)
		}
	}
	all := setLines(t, h.path)
	if int64(len(all)) != last {
		t.Fatalf("the set has %d lines, the stream ended at seq %d", len(all), last)
	}
	if files, _ := audit.Files(h.path); len(files) < 50 {
		t.Fatalf("only %d files: the test wants many rotations", len(files))
	}
	var o struct {
		Chain chainView `json:"chain"`
	}
	h.overview(t, &o)
	if o.Chain.State != "ok" || o.Chain.Lines != len(all) || o.Chain.FirstSeq != 1 {
		t.Fatalf("chain %+v, want ok over all %d lines from seq 1", o.Chain, len(all))
	}
}

func TestACheckpointInTheLogShowsAsItIsAndBreaksTheChain(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "audit.jsonl")
	l, err := audit.Open(path, audit.Options{})
	must(t, err)
	must(t, l.Write(decision("A", "deny", "r")))
	seq, hash := l.Head()
	must(t, l.Close())
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
	must(t, err)
	_, err = f.Write(audit.AppendHead(nil, audit.Head{Log: path, File: "audit.jsonl", Seq: seq, Hash: hash, Time: time.Now().UTC()}))
	must(t, err)
	must(t, f.Close())

	h := start(t, options{audit: path})
	h.waitRecords(t, 2)
	held := h.held(t)
	var rec audit.Record
	must(t, json.Unmarshal([]byte(held[1]), &rec))
	if len(held) != 2 || rec.Kind != "audit_head" {
		t.Fatalf("the console holds %q, want the decision and then the checkpoint as written", held)
	}
	var o struct {
		Chain struct {
			State string            `json:"state"`
			Lines int               `json:"lines"`
			Break *audit.BreakError `json:"break"`
		} `json:"chain"`
	}
	h.overview(t, &o)
	if o.Chain.State != "broken" || o.Chain.Lines != 1 || o.Chain.Break == nil || o.Chain.Break.File != path || o.Chain.Break.Line != 2 {
		t.Fatalf("chain %+v (break %+v), want broken at %s line 2, the checkpoint", o.Chain, o.Chain.Break, path)
	}
}
