package decisionlog_test

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
	"github.com/gatekeeper-ai/gatekeeper/gate/decisionlog"
)

// receiver is a decision-log service written from OPA's documented API
// (POST of a gzipped JSON array of events): it checks every request and
// every event, and keeps the events it acknowledged, in order.
type receiver struct {
	t    *testing.T
	addr string

	mu       sync.Mutex
	srv      *http.Server
	status   int    // the answer to give; 0 is 204
	failNext int    // answer the next this many requests with 400
	token    string // the bearer token to require; "" requires none
	events   []wireEvent
	bodies   [][]byte // every request body, decompressed
	auths    []string // every Authorization header
	requests int
	problems []string
}

// wireEvent is an event as the receiver decodes it.
type wireEvent struct {
	Labels     map[string]string               `json:"labels"`
	DecisionID string                          `json:"decision_id"`
	Revision   string                          `json:"revision"`
	Bundles    map[string]map[string]string    `json:"bundles"`
	Path       string                          `json:"path"`
	Input      map[string]any                  `json:"input"`
	Result     map[string]string               `json:"result"`
	Timestamp  time.Time                       `json:"timestamp"`
	Custom     map[string]decisionlog.Position `json:"custom"`
}

func newReceiver(t *testing.T) *receiver {
	t.Helper()
	r := &receiver{t: t}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	r.addr = ln.Addr().String()
	r.serve(ln)
	t.Cleanup(r.down)
	return r
}

func (r *receiver) url() string { return "http://" + r.addr + "/logs" }

func (r *receiver) serve(ln net.Listener) {
	srv := &http.Server{Handler: http.HandlerFunc(r.handle)}
	r.mu.Lock()
	r.srv = srv
	r.mu.Unlock()
	go srv.Serve(ln)
}

// down closes the listener: connections are refused.
func (r *receiver) down() {
	r.mu.Lock()
	srv := r.srv
	r.srv = nil
	r.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// up listens again on the same address.
func (r *receiver) up() {
	r.t.Helper()
	var ln net.Listener
	var err error
	for range 100 {
		if ln, err = net.Listen("tcp", r.addr); err == nil {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err != nil {
		r.t.Fatal(err)
	}
	r.serve(ln)
}

func (r *receiver) set(f func(r *receiver)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(r)
}

func (r *receiver) handle(w http.ResponseWriter, req *http.Request) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.requests++
	r.auths = append(r.auths, req.Header.Get("Authorization"))
	if req.Method != http.MethodPost || req.URL.Path != "/logs" {
		r.problems = append(r.problems, "request "+req.Method+" "+req.URL.Path)
	}
	if req.Header.Get("Content-Encoding") != "gzip" || req.Header.Get("Content-Type") != "application/json" {
		r.problems = append(r.problems, "headers "+req.Header.Get("Content-Encoding")+" "+req.Header.Get("Content-Type"))
	}
	raw, _ := io.ReadAll(req.Body)
	if len(raw) < 2 || raw[0] != 0x1f || raw[1] != 0x8b {
		r.problems = append(r.problems, "body is not gzip")
		http.Error(w, "not gzip", http.StatusBadRequest)
		return
	}
	zr, err := gzip.NewReader(bytes.NewReader(raw))
	if err != nil {
		r.problems = append(r.problems, "gzip: "+err.Error())
		return
	}
	body, err := io.ReadAll(zr)
	if err != nil {
		r.problems = append(r.problems, "gunzip: "+err.Error())
		return
	}
	r.bodies = append(r.bodies, body)
	if r.token != "" && req.Header.Get("Authorization") != "Bearer "+r.token {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	if r.failNext > 0 {
		r.failNext--
		http.Error(w, "try again", http.StatusBadRequest)
		return
	}
	if r.status != 0 {
		http.Error(w, "unavailable", r.status)
		return
	}
	var evs []wireEvent
	if err := json.Unmarshal(body, &evs); err != nil {
		r.problems = append(r.problems, "decode: "+err.Error())
		http.Error(w, "bad json", http.StatusBadRequest)
		return
	}
	for _, ev := range evs {
		pos, ok := ev.Custom["audit"]
		switch {
		case !ok || pos.Seq < 1 || len(pos.Hash) != 64 || len(pos.Prev) != 64:
			r.problems = append(r.problems, "event without a chain position: "+ev.DecisionID)
		case ev.Labels["app"] != "gatekeeper" || ev.Labels["id"] == "" || ev.Labels["version"] == "":
			r.problems = append(r.problems, "labels of "+ev.DecisionID)
		case ev.DecisionID != ev.Labels["id"]+"-"+strconv.FormatInt(pos.Seq, 10):
			r.problems = append(r.problems, "decision_id "+ev.DecisionID)
		case ev.Timestamp.IsZero() || !strings.HasPrefix(ev.Path, "gatekeeper/"):
			r.problems = append(r.problems, "timestamp or path of "+ev.DecisionID)
		case ev.Input["seq"] != float64(pos.Seq):
			r.problems = append(r.problems, "input of "+ev.DecisionID)
		}
	}
	r.events = append(r.events, evs...)
	w.WriteHeader(http.StatusNoContent)
}

// snapshot returns the events acknowledged so far and the problems seen.
func (r *receiver) snapshot() ([]wireEvent, []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]wireEvent(nil), r.events...), append([]string(nil), r.problems...)
}

// localLines reads every line of the log at path: seq to text.
func localLines(t *testing.T, path string) map[int64][]byte {
	t.Helper()
	fl := audit.NewFollower(path, audit.FollowOptions{Backlog: math.MaxInt})
	defer fl.Close()
	out := map[int64][]byte{}
	for {
		lines, err := fl.Next()
		if err != nil {
			t.Fatal(err)
		}
		if len(lines) == 0 {
			return out
		}
		for _, l := range lines {
			var h struct {
				Seq int64 `json:"seq"`
			}
			if err := json.Unmarshal(l.Text, &h); err != nil {
				t.Fatal(err)
			}
			out[h.Seq] = l.Text
		}
	}
}

// checkChain checks events against the local log: in order, each line
// at most once (twice when dup allows it), each position the local
// line's, each prev the hash of the line before; it returns the seqs
// received, in order, without repeats.
func checkChain(t *testing.T, events []wireEvent, local map[int64][]byte) []int64 {
	t.Helper()
	var seqs []int64
	seen := map[int64]bool{}
	for _, ev := range events {
		pos := ev.Custom["audit"]
		text, ok := local[pos.Seq]
		if !ok {
			t.Fatalf("event %s: seq %d is not in the local log", ev.DecisionID, pos.Seq)
		}
		if got := sha256hex(text); got != pos.Hash {
			t.Fatalf("event %s: hash %s, the local line hashes to %s", ev.DecisionID, pos.Hash, got)
		}
		if prev, ok := local[pos.Seq-1]; ok && sha256hex(prev) != pos.Prev {
			t.Fatalf("event %s: prev %s is not the hash of line %d", ev.DecisionID, pos.Prev, pos.Seq-1)
		}
		if seen[pos.Seq] {
			t.Fatalf("line %d arrived twice", pos.Seq)
		}
		if len(seqs) > 0 && pos.Seq <= seqs[len(seqs)-1] {
			t.Fatalf("line %d arrived after line %d", pos.Seq, seqs[len(seqs)-1])
		}
		seen[pos.Seq] = true
		seqs = append(seqs, pos.Seq)
	}
	return seqs
}
