package server_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

func TestDebugEndpointsNeedTheFlagAndTheToken(t *testing.T) {
	t.Parallel()
	off := start(t, options{})
	on := start(t, options{tune: func(c *server.Config) { c.Debug = true }})
	tests := []struct {
		name   string
		h      *harness
		token  bool
		status int
		body   string
	}{
		{"without the flag there are none", off, true, http.StatusNotFound, ""},
		{"with the flag they need the token", on, false, http.StatusUnauthorized, "bearer token"},
		{"with the flag and the token a goroutine dump is served", on, true, http.StatusOK, "goroutine profile"},
	}
	for _, tc := range tests {
		req, _ := http.NewRequest("GET", "http://gatekeeper/debug/pprof/goroutine?debug=1", nil)
		if tc.token {
			req.Header.Set("Authorization", "Bearer "+tc.h.token)
		}
		resp, err := tc.h.httpClient().Do(req)
		must(t, err)
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != tc.status || !strings.Contains(string(body), tc.body) {
			t.Errorf("%s: %d %.80q, want %d with %q", tc.name, resp.StatusCode, body, tc.status, tc.body)
		}
	}
}
