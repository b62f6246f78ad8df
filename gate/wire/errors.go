package wire

import "errors"

// Sentinel errors of the package. Decode does not return errors: it returns
// the *Error frame to send back.
var (
	// ErrNilReply means Encode was given a nil Reply or nil pointer.
	ErrNilReply = errors.New("nil reply")
)
