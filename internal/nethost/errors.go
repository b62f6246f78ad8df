package nethost

import "errors"

// Sentinel errors, wrapped with context by the functions that return them;
// test for them with errors.Is.
var (
	// ErrBadHost means a host (or host:port) cannot be normalized: it is not
	// a valid DNS name, IDN or IP literal, or its port is not 1-65535.
	ErrBadHost = errors.New("bad host")
	// ErrBadPattern means a host pattern or glob does not parse.
	ErrBadPattern = errors.New("bad host pattern")
	// ErrTooBroad means an allow pattern would match every host under a
	// public suffix, or every host of a wildcard DNS service (see
	// Pattern.CheckAllow).
	ErrTooBroad = errors.New("host pattern too broad")
	// ErrBadURL means a URL is not an http or https URL whose host can be
	// read and normalized.
	ErrBadURL = errors.New("bad url")
)
