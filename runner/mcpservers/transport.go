package mcpservers

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
)

// headerClient is an HTTP client that sends headers with every request,
// follows no redirect, so that the credentials go to the configured URL
// only, and reads at most srv.bound() bytes of an answer.
func (srv *server) headerClient(headers map[string]string) *http.Client {
	return &http.Client{
		Transport: headerTransport{base: http.DefaultTransport.(*http.Transport).Clone(), headers: headers, bound: srv.bound(), dropped: srv.dropped},
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return errors.New("the MCP server redirected; redirects are not followed, so that its credentials go nowhere else")
		},
	}
}

type headerTransport struct {
	base    http.RoundTripper
	headers map[string]string
	bound   int
	dropped func(what string, n int)
}

func (h headerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	req = req.Clone(req.Context())
	for k, v := range h.headers {
		req.Header.Set(k, v)
	}
	var id json.RawMessage
	if req.Method == http.MethodPost && req.GetBody != nil {
		if body, err := req.GetBody(); err == nil {
			raw, _ := io.ReadAll(io.LimitReader(body, int64(h.bound)))
			body.Close()
			id = requestID(raw)
		}
	}
	resp, err := h.base.RoundTrip(req)
	if err != nil || req.Method != http.MethodPost {
		return resp, err
	}
	// The answer to one request (its result, and any notifications
	// before it) is bounded as one stdio line is.
	ct, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	if id != nil && resp.StatusCode == http.StatusOK && (ct == "application/json" || ct == "text/event-stream") {
		resp.Body = &boundedBody{body: resp.Body, id: id, sse: ct == "text/event-stream", bound: h.bound, dropped: h.dropped}
	} else {
		resp.Body = &limitedBody{ReadCloser: resp.Body, left: int64(h.bound), bound: h.bound}
	}
	return resp, err
}

// limitedBody fails a read past left bytes.
type limitedBody struct {
	io.ReadCloser
	left  int64
	bound int
}

func (b *limitedBody) Read(p []byte) (int, error) {
	if b.left <= 0 {
		return 0, fmt.Errorf("the server's answer is larger than %d bytes", b.bound)
	}
	if int64(len(p)) > b.left {
		p = p[:b.left]
	}
	n, err := b.ReadCloser.Read(p)
	b.left -= int64(n)
	return n, err
}
