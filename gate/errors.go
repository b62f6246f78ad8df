package gate

import (
	"errors"
	"fmt"
)

var (
	// ErrPolicy means a policy file or Rego module could not be loaded or
	// compiled; the error text names the file and line.
	ErrPolicy = errors.New("policy error")
	// ErrBadDecision means Rego produced something other than a well-formed
	// decision object.
	ErrBadDecision = errors.New("malformed decision")
)

// OverrideError refuses a per-query override and lists every violation.
type OverrideError struct {
	Violations []string
}

func (e *OverrideError) Error() string {
	return fmt.Sprintf("sandbox policy override rejected: %d violation(s)", len(e.Violations))
}
