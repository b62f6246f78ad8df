package wire

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/gatekeeper-ai/gatekeeper/internal/nethost"
)

// EventHTTPRequest is the Decide.Event of a request of sandboxed code to
// an intercepted host: a decide frame with it carries HTTP instead of a
// tool call, so that an operator can test the policy's request rules
// (docs/protocol.md, "decide").
const EventHTTPRequest = "http_request"

// HTTPRequest is the request a decide frame of event EventHTTPRequest
// asks about, as the egress proxy would give it to the policy
// (input.http). Defaults fill what is left out.
type HTTPRequest struct {
	// RunID names the run the request would come from ("" when absent).
	RunID string `json:"run_id,omitempty"`
	// Method is the method as sent; never "".
	Method string `json:"method"`
	// Scheme is "https" (the default) or "http".
	Scheme string `json:"scheme"`
	// Host is the host, normalized as the proxy does.
	Host string `json:"host"`
	// Port is 1 to 65535; absent means the scheme's (443 or 80).
	Port int `json:"port"`
	// Path is the request path, starting with "/"; Query its raw query
	// without "?" ("" when absent).
	Path  string `json:"path"`
	Query string `json:"query,omitempty"`
	// Proto is "HTTP/1.1" (the default) or "HTTP/2.0".
	Proto string `json:"proto"`
	// Headers are header names: canonical, sorted and once each after
	// decoding, at most MaxHTTPHeaders.
	Headers []string `json:"headers,omitzero"`
	// BodyBytes is the body's length, -1 for unknown; absent means len(Body).
	BodyBytes int64 `json:"body_bytes"`
	// Body is the first bytes of the body, as the policy sees them.
	Body string `json:"body,omitempty"`
	// Secrets name the secrets the proxy would inject.
	Secrets []string `json:"secrets,omitzero"`
}

// MaxHTTPHeaders bounds HTTPRequest.Headers and Secrets.
const MaxHTTPHeaders = 256

var httpRequestKeys = []string{"run_id", "method", "scheme", "host", "port", "path", "query", "proto", "headers", "body_bytes", "body", "secrets"}

// callKeys are the fields of a tool call, which a decide frame of event
// EventHTTPRequest does not have.
var callKeys = []string{"tool_name", "tool_input", "tool_use_id", "mcp_server", "cwd", "agent_id", "agent_type"}

// callOrHTTP reads the rest of a decide frame after its event: the
// fields of a tool call, or for event EventHTTPRequest its "http" object.
func (r *reader) callOrHTTP(d *Decide, onWire bool) {
	if d.Event == EventHTTPRequest {
		r.httpDecide(d)
		return
	}
	if r.get("http") != nil {
		r.fail(CodeInvalidField, fmt.Sprintf("field \"http\" is part of a decide of event %q only", EventHTTPRequest))
		return
	}
	r.call(d, onWire)
}

// httpDecide reads the "http" object of a decide frame of event
// EventHTTPRequest, which has none of the fields of a tool call.
func (r *reader) httpDecide(d *Decide) {
	for _, k := range callKeys {
		if r.get(k) != nil {
			r.fail(CodeInvalidField, fmt.Sprintf("field %s is not part of a decide of event %q, which carries \"http\"", quote(k), EventHTTPRequest))
			return
		}
	}
	m := r.field("http", true, kindObject)
	sub := r.element(m.rawOrNil(), "http")
	if sub == nil {
		return
	}
	sub.known(httpRequestKeys)
	h := &HTTPRequest{Scheme: "https", Proto: "HTTP/1.1"}
	if m := sub.field("run_id", false, kindString); m != nil {
		h.RunID = sub.str(m)
	}
	h.Method = sub.nonEmpty("method")
	if sub.get("scheme") != nil {
		h.Scheme = sub.enum("scheme", "https", "http")
	}
	if host := sub.nonEmpty("host"); sub.err == nil {
		n, err := nethost.Normalize(host)
		if err != nil {
			sub.fail(CodeInvalidField, fmt.Sprintf("field \"http.host\": %v", err))
		}
		h.Host = n
	}
	h.Port = 443
	if h.Scheme == "http" {
		h.Port = 80
	}
	if m := sub.field("port", false, kindInteger); m != nil {
		n, err := strconv.Atoi(string(m.raw))
		if err != nil || n < 1 || n > 65535 {
			sub.fail(CodeInvalidField, `field "http.port" must be an integer from 1 to 65535`)
		}
		h.Port = n
	}
	if h.Path = sub.nonEmpty("path"); sub.err == nil && !strings.HasPrefix(h.Path, "/") {
		sub.fail(CodeInvalidField, `field "http.path" must start with "/"`)
	}
	if m := sub.field("query", false, kindString); m != nil {
		h.Query = sub.str(m)
	}
	if sub.get("proto") != nil {
		h.Proto = sub.enum("proto", "HTTP/1.1", "HTTP/2.0")
	}
	h.Headers = sub.names("headers", true)
	h.Secrets = sub.names("secrets", false)
	if m := sub.field("body", false, kindString); m != nil {
		h.Body = sub.str(m)
	}
	h.BodyBytes = int64(len(h.Body))
	if m := sub.field("body_bytes", false, kindInteger); m != nil {
		n, err := strconv.ParseInt(string(m.raw), 10, 64)
		if err != nil || n < -1 {
			sub.fail(CodeInvalidField, `field "http.body_bytes" must be an integer of at least -1`)
		}
		h.BodyBytes = n
	}
	r.err = sub.err
	d.HTTP = h
}

// names reads an optional array of at most MaxHTTPHeaders strings, sorted
// and once each (header names canonical when header is set).
func (r *reader) names(key string, header bool) []string {
	m := r.field(key, false, kindArray)
	if m == nil {
		return nil
	}
	items := r.array(m, r.prefix+key, MaxHTTPHeaders, "names")
	out := make([]string, 0, len(items))
	for _, it := range items {
		var s string
		if len(it) == 0 || it[0] != '"' || json.Unmarshal(it, &s) != nil || s == "" {
			r.fail(CodeInvalidField, fmt.Sprintf("field %s must be an array of non-empty strings", quote(r.prefix+key)))
			return nil
		}
		if header {
			s = http.CanonicalHeaderKey(s)
		}
		out = append(out, s)
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// rawOrNil is m's raw value, or nil for a nil member.
func (m *member) rawOrNil() json.RawMessage {
	if m == nil {
		return nil
	}
	return m.raw
}
