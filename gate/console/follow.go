package console

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/audit"
)

// FollowConfig says what Follow reads.
type FollowConfig struct {
	// URL is the sidecar: unix:///path.sock, tcp://host:port,
	// http://host:port or ws://host:port (as GATEKEEPER_URL).
	URL string
	// Token is the sidecar's bearer token.
	Token  string
	Filter Filter
	// Backfill is how many past records to get first (0: none).
	Backfill int
	// Follow keeps reading new records until ctx ends, reconnecting (and
	// resuming after the last record seen) when the stream breaks; without
	// it Follow returns once the history has been read.
	Follow bool
}

// Follow reads the console's live stream and calls fn with each record:
// the audit line as written, and decoded. It returns nil when ctx ends
// (or, without cfg.Follow, once the history is read), the error of fn,
// or an error when the sidecar refuses (a wrong token) or cannot be
// reached at first.
func Follow(ctx context.Context, cfg FollowConfig, fn func(raw []byte, rec *audit.Record) error) error {
	base, client, err := httpClient(cfg.URL)
	if err != nil {
		return err
	}
	var last string
	connected := false
	for {
		err := followOnce(ctx, client, base, cfg, &last, &connected, fn)
		var fe fatal
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errDone):
			return nil
		case errors.As(err, &fe):
			return fe.err
		case !connected || !cfg.Follow:
			return err
		}
		select { // the stream broke: reconnect after a pause
		case <-ctx.Done():
			return nil
		case <-time.After(time.Second):
		}
	}
}

// errDone ends a Follow without cfg.Follow once the history is read.
var errDone = errors.New("history read")

// fatal is an error no reconnection cures: a refusal, or fn's error.
type fatal struct{ err error }

func (f fatal) Error() string { return f.err.Error() }

// httpClient returns the base URL and a client for a sidecar address.
func httpClient(addr string) (string, *http.Client, error) {
	switch {
	case strings.HasPrefix(addr, "unix://"):
		path := strings.TrimPrefix(addr, "unix://")
		return "http://gatekeeper", &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", path)
		}}}, nil
	case strings.HasPrefix(addr, "tcp://"), strings.HasPrefix(addr, "ws://"), strings.HasPrefix(addr, "http://"):
		_, hostport, _ := strings.Cut(addr, "://")
		hostport, _, _ = strings.Cut(hostport, "/")
		return "http://" + hostport, &http.Client{}, nil
	}
	return "", nil, fmt.Errorf("sidecar address %q: want unix:///path, tcp://host:port, ws://host:port or http://host:port", addr)
}

func followOnce(ctx context.Context, client *http.Client, base string, cfg FollowConfig, last *string, connected *bool, fn func([]byte, *audit.Record) error) error {
	q := cfg.Filter.Values()
	q.Set("limit", fmt.Sprint(cfg.Backfill))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, base+"/ui/api/stream?"+q.Encode(), nil)
	if err != nil {
		return err
	}
	req.Header.Set("Authorization", "Bearer "+cfg.Token)
	req.Header.Set("Accept", "text/event-stream")
	if *last != "" {
		req.Header.Set("Last-Event-ID", *last)
	}
	resp, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("connect to the sidecar: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		var e struct {
			Error string `json:"error"`
		}
		_ = json.NewDecoder(resp.Body).Decode(&e)
		if resp.StatusCode == http.StatusNotFound {
			e.Error = "the sidecar serves no console: start it with serve --ui"
		}
		return fatal{fmt.Errorf("sidecar answered %s: %s", resp.Status, e.Error)}
	}
	*connected = true
	br := bufio.NewReaderSize(resp.Body, 64<<10)
	var id, event string
	var data []byte
	for {
		line, err := br.ReadBytes('\n')
		if err != nil {
			return fmt.Errorf("stream ended: %w", err)
		}
		line = bytes.TrimRight(line, "\r\n")
		switch {
		case len(line) == 0:
			switch event {
			case "record":
				var ev struct {
					Line json.RawMessage `json:"line"`
				}
				var rec audit.Record
				if err := json.Unmarshal(data, &ev); err != nil || json.Unmarshal(ev.Line, &rec) != nil {
					return fatal{fmt.Errorf("bad record from the sidecar: %.200s", data)}
				}
				if err := fn(ev.Line, &rec); err != nil {
					return fatal{err}
				}
				*last = id
			case "ready":
				if !cfg.Follow {
					return errDone
				}
			case "logout":
				return fatal{errors.New("the sidecar ended the session")}
			}
			event, data = "", nil
		case bytes.HasPrefix(line, []byte("id: ")):
			id = string(line[4:])
		case bytes.HasPrefix(line, []byte("event: ")):
			event = string(line[7:])
		case bytes.HasPrefix(line, []byte("data: ")):
			data = append(data, line[6:]...)
		}
	}
}
