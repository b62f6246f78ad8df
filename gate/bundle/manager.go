package bundle

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate"
)

// ErrRollback marks a bundle refused because its serial is below the
// running bundle's; ErrExpired one whose expiry has passed.
var (
	ErrRollback = errors.New("bundle rollback refused")
	ErrExpired  = errors.New("bundle expired")
)

// Config configures a Manager.
type Config struct {
	// URL is where the bundle is served (http or https).
	URL string
	// Poll is the time between downloads (rounded up to whole seconds,
	// at least 1s, as OPA's downloader counts them).
	Poll time.Duration
	// TokenFile, when set, holds a bearer token sent with every
	// download (OPA's bearer credentials, token_path).
	TokenFile string
	// Verify, when set, is the key every bundle must be signed with.
	Verify *Verification
	// AllowRollback lets a bundle with a lower serial replace the
	// running one.
	AllowRollback bool
	// CacheDir keeps the last good bundle (bundle.tar.gz, mode 0600, in
	// a 0700 directory), read again, signature and all, at start.
	CacheDir string
	// Logger receives what the manager does; nil means slog.Default().
	Logger *slog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
}

// Manager is the policy bundle a sidecar runs on: a gate.Source that
// offers the engine the last good bundle, or, with none (or once it has
// expired), a policy that denies every call saying why. It is safe for
// concurrent use.
type Manager struct {
	cfg Config
	log *slog.Logger

	mu      sync.Mutex
	eng     *gate.Engine
	current *Contents // the bundle in force, nil for none
	pending *Contents // a bundle being offered to the engine
	expired bool      // current has expired
	cached  bool      // current came from the cache
	etag    string    // current's ETag
	lastOK  time.Time // last download that answered
	lastErr string    // last download or refusal error
	refused string    // last refusal recorded in the engine's history
}

// New makes a Manager and reads the cached bundle, if any, through the
// same checks as a download (signature, layout, expiry). A cache that
// does not pass is logged and ignored.
func New(cfg Config) (*Manager, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if err := checkURL(cfg.URL); err != nil {
		return nil, err
	}
	m := &Manager{cfg: cfg, log: cfg.Logger}
	if cfg.CacheDir == "" {
		return m, nil
	}
	raw, etag, err := readCache(cfg.CacheDir)
	switch {
	case errors.Is(err, errNoCache):
		m.log.Warn("no cached policy bundle; every call is denied until one is downloaded", "cache", cfg.CacheDir, "url", cfg.URL)
	case err != nil:
		m.log.Error("cached policy bundle unreadable; ignored", "cache", cfg.CacheDir, "err", err)
	default:
		c, err := Read(raw, cfg.Verify)
		if err == nil && !c.Expires.IsZero() && !cfg.Now().Before(c.Expires) {
			err = fmt.Errorf("%w: revision %s expired at %s", ErrExpired, c.Revision, c.Expires.Format(time.RFC3339))
		}
		if err != nil {
			m.log.Error("cached policy bundle refused; ignored", "cache", cfg.CacheDir, "err", err)
			m.lastErr = "cached bundle: " + err.Error()
			break
		}
		m.current, m.cached, m.etag = c, true, etag
		m.log.Info("starting on the cached policy bundle", "revision", c.Revision, "serial", c.Serial, "cache", cfg.CacheDir)
	}
	return m, nil
}

// Attach gives the manager the engine it feeds; Offer reloads it.
func (m *Manager) Attach(eng *gate.Engine) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.eng = eng
}

// PolicyDocument is gate.Source: the bundle being offered, else the one
// in force, else a policy denying every call with the reason.
func (m *Manager) PolicyDocument() (gate.Document, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	c := m.pending
	if c == nil && !m.expired {
		c = m.current
	}
	if c == nil {
		return m.closedDocument(), nil
	}
	return c.PolicyDocument()
}

// closedDocument is the policy in force without a usable bundle: every
// call is denied with a reason saying so. Called with mu held.
func (m *Manager) closedDocument() gate.Document {
	reason := "no policy bundle has been loaded yet (gatekeeper serve --bundle " + m.cfg.URL + "): every call is denied until one is"
	rev := "none"
	if m.expired && m.current != nil {
		reason = fmt.Sprintf("the policy bundle %s expired at %s and no newer one has been loaded: every call is denied until one is",
			m.current.Revision, m.current.Expires.Format(time.RFC3339))
		rev = "expired"
	}
	q, _ := json.Marshal(reason)
	mod := "package gatekeeper\n\ndeny contains {\"rule\": \"bundle.unavailable\", \"reason\": " + string(q) + "}\n"
	return gate.Document{
		Name:     "gatekeeper (no policy bundle)",
		Policy:   []byte("version: 1\nworkspace_root: /nonexistent/gatekeeper-no-policy-bundle\n"),
		Dir:      "/",
		Modules:  map[string][]byte{"gatekeeper/no-policy-bundle.rego": []byte(mod)},
		Revision: rev,
	}
}

// Offer checks a bundle read and verified by OPA's reader (anti-rollback,
// expiry) and offers it to the engine, which validates and compiles it as
// it does the policy file. On success it is in force and raw (its
// .tar.gz) is cached; on failure the running policy stays, and the error
// says why.
func (m *Manager) Offer(ctx context.Context, c *Contents, raw []byte, etag string) error {
	m.mu.Lock()
	eng, cur := m.eng, m.current
	now := m.cfg.Now()
	var err error
	switch {
	case cur != nil && c.Serial == cur.Serial && c.Revision == cur.Revision && !m.expired:
		m.etag = etag
		m.mu.Unlock()
		return nil // the same bundle again
	case !c.Expires.IsZero() && !now.Before(c.Expires):
		err = fmt.Errorf("%w: revision %s expired at %s", ErrExpired, c.Revision, c.Expires.Format(time.RFC3339))
	case cur != nil && c.Serial < cur.Serial && !m.cfg.AllowRollback:
		err = fmt.Errorf("%w: revision %s has serial %d, below the running revision %s's %d (--bundle-allow-rollback allows it)",
			ErrRollback, c.Revision, c.Serial, cur.Revision, cur.Serial)
	case cur != nil && c.Serial == cur.Serial && !m.cfg.AllowRollback:
		err = fmt.Errorf("%w: revision %s has serial %d, the running revision %s's: a new bundle needs a higher serial",
			ErrRollback, c.Revision, c.Serial, cur.Revision)
	}
	if err != nil {
		m.mu.Unlock()
		m.refuse(eng, c.Revision, err)
		return err
	}
	m.pending = c
	m.mu.Unlock()

	if eng != nil {
		err = eng.Reload(ctx) // validates and compiles; logs a refusal itself
	}
	m.mu.Lock()
	m.pending = nil
	if err != nil {
		m.lastErr = err.Error()
		m.mu.Unlock()
		return err
	}
	m.current, m.expired, m.cached, m.etag, m.lastErr = c, false, false, etag, ""
	m.mu.Unlock()
	m.log.Info("policy bundle in force", "revision", c.Revision, "serial", c.Serial, "signed", c.Signed, "engine_revision", revisionOf(eng))
	if m.cfg.CacheDir != "" && raw != nil {
		if err := writeCache(m.cfg.CacheDir, raw, etag); err != nil {
			m.log.Error("could not cache the policy bundle; a restart without the bundle service will deny every call", "cache", m.cfg.CacheDir, "err", err)
		}
	}
	return nil
}

// refuse logs a bundle refused before the engine saw it and records it
// in the engine's reload history, once per distinct error.
func (m *Manager) refuse(eng *gate.Engine, rev string, err error) {
	m.mu.Lock()
	m.lastErr = err.Error()
	again := m.refused == err.Error()
	m.refused = err.Error()
	m.mu.Unlock()
	if again {
		return
	}
	m.log.Error("policy bundle refused; keeping the running policy", "revision", rev, "err", err)
	if eng != nil {
		eng.Refused(rev, err)
	}
}

// checkExpiry fails closed once the bundle in force has expired: the
// engine reloads the policy that denies every call, saying so.
func (m *Manager) checkExpiry(ctx context.Context) {
	m.mu.Lock()
	c, eng := m.current, m.eng
	due := c != nil && !m.expired && !c.Expires.IsZero() && !m.cfg.Now().Before(c.Expires)
	if due {
		m.expired = true
		m.lastErr = fmt.Sprintf("revision %s expired at %s", c.Revision, c.Expires.Format(time.RFC3339))
	}
	m.mu.Unlock()
	if !due {
		return
	}
	m.log.Error("the policy bundle in force has expired; every call is denied until a newer one is loaded", "revision", c.Revision, "expired_at", c.Expires)
	if eng != nil {
		if err := eng.Reload(ctx); err != nil {
			m.log.Error("could not switch to the deny-all policy after expiry", "err", err)
		}
	}
}

func revisionOf(eng *gate.Engine) string {
	if eng == nil {
		return ""
	}
	return eng.Revision()
}

// Status is what /readyz reports.
type Status struct {
	// Ready is true when a bundle that has not expired is in force.
	Ready  bool   `json:"ready"`
	Reason string `json:"reason,omitempty"`
	URL    string `json:"bundle_url"`
	// Revision and Serial are the manifest's; empty and zero with none.
	Revision string     `json:"bundle_revision"`
	Serial   int64      `json:"bundle_serial,omitempty"`
	Expires  *time.Time `json:"bundle_expires,omitempty"`
	// SignatureVerified is true when the bundle in force was signed and
	// its signature verified with the configured key.
	SignatureVerified bool   `json:"signature_verified"`
	FromCache         bool   `json:"from_cache"`
	ETag              string `json:"etag,omitempty"`
	// LastDownload is the last time the bundle service answered.
	LastDownload *time.Time `json:"last_download,omitempty"`
	LastError    string     `json:"last_error,omitempty"`
}

// Status reports the manager's state.
func (m *Manager) Status() Status {
	m.mu.Lock()
	defer m.mu.Unlock()
	s := Status{URL: m.cfg.URL, LastError: m.lastErr, FromCache: m.cached, ETag: m.etag}
	if !m.lastOK.IsZero() {
		t := m.lastOK
		s.LastDownload = &t
	}
	switch c := m.current; {
	case c == nil:
		s.Reason = "no policy bundle has been loaded: every call is denied"
	case m.expired:
		s.Reason = "the policy bundle " + c.Revision + " has expired: every call is denied"
	default:
		s.Ready = true
	}
	if c := m.current; c != nil {
		s.Revision, s.Serial, s.SignatureVerified = c.Revision, c.Serial, c.Signed
		if !c.Expires.IsZero() {
			t := c.Expires
			s.Expires = &t
		}
	}
	return s
}

// ETag is the ETag of the bundle in force, for the downloader's first
// If-None-Match.
func (m *Manager) ETag() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.etag
}

func (m *Manager) answered(err error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if err == nil {
		m.lastOK = m.cfg.Now()
	} else {
		m.lastErr = err.Error()
	}
}
