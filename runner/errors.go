package runner

import "errors"

// Sentinel errors a backend wraps so callers can classify failures.
var (
	// ErrUnavailable means the backend (the engine) cannot be reached.
	ErrUnavailable = errors.New("runner unavailable")
	// ErrRuntimeUnavailable means the requested OCI runtime is not installed.
	ErrRuntimeUnavailable = errors.New("runtime unavailable")
	// ErrLanguageUnavailable means the image has no interpreter for the language.
	ErrLanguageUnavailable = errors.New("language unavailable in image")
	// ErrInvalidSpec means the Spec itself is refused (bad path, uid 0, forbidden mount).
	ErrInvalidSpec = errors.New("invalid run spec")
	// ErrNetworkUnsupported means the backend cannot enforce the requested network policy.
	ErrNetworkUnsupported = errors.New("network policy not supported")
)
