package runner

import (
	"context"
	"fmt"
)

// Secret is a credential a networked run can use but never read. The
// sandbox sees only a sentinel, a random stand-in made for its sandbox,
// in the environment variable or file Sentinel names. The egress proxy
// swaps the sentinel for Value in a request to one of Hosts, in Inject's
// place only, and only once the policy allowed the request (see
// RequestJudge). A sentinel sent anywhere else, or found elsewhere than
// Inject's place in a request to Hosts, refuses the request; with
// Require, so does a request to Hosts without it.
type Secret struct {
	// Name is the policy's name of the secret: audit lines and the
	// policy's input name it, never its value.
	Name string
	// Hosts are host patterns (nethost syntax) the value may be sent to.
	// Every one of them is intercepted.
	Hosts []string
	// Inject says where in a request the sentinel is swapped.
	Inject SecretPlace
	// Sentinel says where the run finds its stand-in.
	Sentinel SecretSentinel
	// Require refuses a request to Hosts that does not carry the
	// sentinel in Inject's place, so that code cannot bring a key of
	// its own.
	Require bool
	// Value is the real credential, read by the sidecar when the run
	// starts.
	Value Hidden
}

// SecretPlace is where a Secret's sentinel is swapped: exactly one field is set.
type SecretPlace struct {
	// Header names a request header whose value holds the sentinel
	// (Authorization: Bearer <sentinel>).
	Header string
	// Basic is "user", "password" or "either": the part of HTTP Basic
	// credentials (inside their base64) that holds the sentinel.
	Basic string
	// Query names a query parameter whose value holds the sentinel.
	Query string
	// Body swaps the sentinel wherever it appears in the request body.
	Body bool
}

// The parts of Basic credentials a SecretPlace.Basic may name.
const (
	BasicUser     = "user"
	BasicPassword = "password"
	BasicEither   = "either"
)

// String describes the place as the policy writes it, for messages.
func (p SecretPlace) String() string {
	switch {
	case p.Header != "":
		return "header " + p.Header
	case p.Basic != "":
		return "basic auth " + p.Basic
	case p.Query != "":
		return "query parameter " + p.Query
	case p.Body:
		return "body"
	}
	return "nowhere"
}

// SecretSentinel is where the run finds a Secret's sentinel: exactly one
// field is set.
type SecretSentinel struct {
	// Env is the name of an environment variable of the program.
	Env string
	// File is an absolute path in the sandbox, below /tmp or /workspace,
	// that holds the sentinel (no newline).
	File string
}

// Hidden holds a secret value. It prints, formats and marshals as
// "[hidden]", so that logging a Spec or an error that wraps one never
// writes it; Reveal returns it.
type Hidden struct{ v string }

// NewHidden wraps v.
func NewHidden(v string) Hidden { return Hidden{v: v} }

// Reveal returns the secret value.
func (h Hidden) Reveal() string { return h.v }

// String returns "[hidden]".
func (Hidden) String() string { return "[hidden]" }

// GoString returns "[hidden]".
func (Hidden) GoString() string { return "[hidden]" }

// Format writes "[hidden]" whatever the verb.
func (Hidden) Format(f fmt.State, _ rune) { _, _ = f.Write([]byte("[hidden]")) }

// MarshalJSON writes "[hidden]".
func (Hidden) MarshalJSON() ([]byte, error) { return []byte(`"[hidden]"`), nil }

// MarshalText writes "[hidden]".
func (Hidden) MarshalText() ([]byte, error) { return []byte("[hidden]"), nil }

// HTTPRequest is one request of a run to an intercepted host, as the
// policy decides it (event http_request). The proxy has terminated its
// TLS, so it sees the request whole.
type HTTPRequest struct {
	// Method is the request method, as sent (upper case for the standard ones).
	Method string
	// Scheme is "https", or "http" for a forwarded plain request.
	Scheme string
	// Host is the normalized host name (nethost.Normalize) and Port its port.
	Host string
	Port uint16
	// Path is the request path as sent (escaped form), Query its raw query (no "?").
	Path, Query string
	// Proto is "HTTP/1.1" or "HTTP/2.0".
	Proto string
	// Headers are the request's header names, canonical, sorted, each once.
	Headers []string
	// BodyBytes is the body's length; -1 when it is not known before it is
	// sent (chunked and longer than the preview).
	BodyBytes int64
	// Body is the body's first Network.BodyPreview bytes (with sentinels, never secrets).
	Body []byte
	// Secrets are the secrets the proxy would inject into this request, by name.
	Secrets []string
}

// HTTPVerdict is a RequestJudge's answer. Rule and Reason are what a
// refused program reads in the 403's body, and what the audit line says.
type HTTPVerdict struct {
	Allow        bool
	Rule, Reason string
}

// RequestJudge decides a run's requests to intercepted hosts
// (Spec.Requests). The gate implements it with the policy's Rego (event
// http_request). It must return when ctx ends; an error inside it is a
// refusal, never an allow.
type RequestJudge interface {
	JudgeRequest(ctx context.Context, req HTTPRequest) HTTPVerdict
}
