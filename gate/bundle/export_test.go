package bundle

import "context"

// CheckExpiry is checkExpiry, for tests that move the clock.
func (m *Manager) CheckExpiry(ctx context.Context) { m.checkExpiry(ctx) }
