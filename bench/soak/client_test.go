package soak

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/gorilla/websocket"
)

// scripted is a WebSocket server that answers every frame with the
// replies answer gives, after release is closed.
func scripted(t *testing.T, release <-chan struct{}, answer func(id string) []string) *Conn {
	t.Helper()
	up := websocket.Upgrader{}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := up.Upgrade(w, r, nil)
		if err != nil {
			return
		}
		defer ws.Close()
		for {
			_, data, err := ws.ReadMessage()
			if err != nil {
				return
			}
			var f struct{ ID string }
			_ = json.Unmarshal(data, &f)
			<-release
			for _, reply := range answer(f.ID) {
				if ws.WriteMessage(websocket.TextMessage, []byte(reply)) != nil {
					return
				}
			}
		}
	}))
	t.Cleanup(srv.Close)
	ws, _, err := websocket.DefaultDialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http"), nil)
	if err != nil {
		t.Fatal(err)
	}
	c := newConn(ws)
	t.Cleanup(func() { c.Close() })
	return c
}

func decisionFrame(id string) string {
	return `{"type":"decision","id":"` + id + `","decision":"allow"}`
}

// The reply to a request whose waiter gave up because the load stopped is
// late, not unsolicited: the soak's stop must not fail its accounting.
func TestConnLateReplyAfterStopIsNotUnsolicited(t *testing.T) {
	release := make(chan struct{})
	c := scripted(t, release, func(id string) []string { return []string{decisionFrame(id)} })
	ctx, cancel := context.WithCancel(context.Background())
	id, err := c.Send(map[string]any{"type": "decide"})
	if err != nil {
		t.Fatal(err)
	}
	cancel()
	if _, _, _, err := c.Wait(ctx, id, time.Minute); err != context.Canceled {
		t.Fatalf("Wait after the stop: %v, want context.Canceled", err)
	}
	close(release)
	waitFor(t, func() bool { _, _, late := c.Unsolicited(); return late == 1 })
	if n, s, _ := c.Unsolicited(); n != 0 {
		t.Fatalf("%d unsolicited replies (%v), want 0", n, s)
	}
}

// A second terminal reply to one request is unsolicited, and says which.
func TestConnSecondReplyIsUnsolicited(t *testing.T) {
	release := make(chan struct{})
	close(release)
	c := scripted(t, release, func(id string) []string {
		return []string{decisionFrame(id), `{"type":"error","id":"` + id + `","code":"internal"}`}
	})
	f, err := c.Do(context.Background(), map[string]any{"type": "decide"}, time.Minute)
	if err != nil || f.Type != "decision" {
		t.Fatalf("Do: %+v, %v", f, err)
	}
	waitFor(t, func() bool { n, _, _ := c.Unsolicited(); return n == 1 })
	_, s, late := c.Unsolicited()
	if late != 0 || len(s) != 1 || !strings.Contains(s[0], `error internal for id "1"`) {
		t.Fatalf("samples %q, late %d; want the error for id 1 and no late reply", s, late)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); !cond(); {
		if time.Now().After(deadline) {
			t.Fatal("condition not met within 10 s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
