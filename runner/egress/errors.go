package egress

import "errors"

// Sentinel errors. Exported ones are wrapped with context by the functions
// that return them; test for them with errors.Is.
var (
	// ErrBadHost means a host (or host:port) cannot be normalized: it is not
	// a valid DNS name, IDN or IP literal, or its port is not 1-65535.
	ErrBadHost = errors.New("bad host")
	// ErrBadPattern means a sandbox.net.allow or sandbox.net.deny entry (or a
	// Config.ExtraVendorHosts entry) is not a valid host pattern.
	ErrBadPattern = errors.New("bad host pattern")
	// ErrAlreadyRegistered means Register was given a source address that
	// another run still holds; Unregister it first.
	ErrAlreadyRegistered = errors.New("source address already registered")
	// ErrInvalidConfig means New was given a Config it cannot run with.
	ErrInvalidConfig = errors.New("invalid egress proxy config")
)

// Errors that end a connection early; they reach callers only as the
// Event.Error text.
var (
	errByteLimit   = errors.New("byte limit reached")
	errIdleTimeout = errors.New("idle timeout")
)
