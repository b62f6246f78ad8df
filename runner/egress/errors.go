package egress

import "errors"

// Sentinel errors. Exported ones are wrapped with context by the functions
// that return them; test for them with errors.Is. Bad hosts and host
// patterns wrap internal/nethost's ErrBadHost and ErrBadPattern.
var (
	// ErrAlreadyRegistered means Register was given a source address that
	// another run still holds; Unregister it first.
	ErrAlreadyRegistered = errors.New("source address already registered")
	// ErrNotRegistered means Bind was given a source address no sandbox
	// is registered at.
	ErrNotRegistered = errors.New("source address not registered")
	// ErrNoCA means Register was given a Network that inspects hosts or
	// carries secrets on a Proxy made without a CA (Config.CA), which
	// cannot intercept anything.
	ErrNoCA = errors.New("egress proxy has no CA to intercept with")
	// ErrInvalidConfig means New was given a Config it cannot run with.
	ErrInvalidConfig = errors.New("invalid egress proxy config")
)

// Errors that end a connection early; they reach callers only as the
// Event.Error text.
var (
	errByteLimit   = errors.New("byte limit reached")
	errIdleTimeout = errors.New("idle timeout")
)
