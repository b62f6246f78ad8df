package egresstest

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"io"
	"net/http"
	"sync"
)

// EchoBodyMax is how much of a request body Echo puts in its reply; the
// reply's BodyBytes and BodySHA256 cover the whole body.
const EchoBodyMax = 1 << 20

// EchoRequest is what Echo saw of one request, and the JSON it replies
// with.
type EchoRequest struct {
	Method  string              `json:"method"`
	Host    string              `json:"host"`
	Path    string              `json:"path"`
	Query   string              `json:"query"`
	Proto   string              `json:"proto"`
	Headers map[string][]string `json:"headers"`
	// Body is the body's first EchoBodyMax bytes, as a string.
	Body       string `json:"body"`
	BodyBytes  int64  `json:"body_bytes"`
	BodySHA256 string `json:"body_sha256"`
}

// Echo is a handler that replies to every request with the request itself
// as JSON (EchoRequest), headers and body included, so that a test sees
// what a program would read back of what it sent, and records what it
// received, so that the test sees what the upstream got. The zero Echo is
// ready; it is safe for concurrent use.
type Echo struct {
	mu   sync.Mutex
	seen []EchoRequest
}

// ServeHTTP echoes r.
func (e *Echo) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	sum := sha256.New()
	var head []byte
	n, err := io.Copy(io.MultiWriter(sum, writerFunc(func(p []byte) (int, error) {
		if room := EchoBodyMax - len(head); room > 0 {
			head = append(head, p[:min(room, len(p))]...)
		}
		return len(p), nil
	})), r.Body)
	if err != nil {
		http.Error(w, "egresstest echo: read the body: "+err.Error(), http.StatusBadRequest)
		return
	}
	req := EchoRequest{
		Method: r.Method, Host: r.Host, Path: r.URL.EscapedPath(), Query: r.URL.RawQuery, Proto: r.Proto,
		Headers: r.Header.Clone(), Body: string(head), BodyBytes: n, BodySHA256: hex.EncodeToString(sum.Sum(nil)),
	}
	e.mu.Lock()
	e.seen = append(e.seen, req)
	e.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(req)
}

// Requests returns the requests echoed so far, in order.
func (e *Echo) Requests() []EchoRequest {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]EchoRequest(nil), e.seen...)
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }
