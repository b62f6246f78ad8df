package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/gatekeeper-ai/gatekeeper/gate/server"
)

const (
	// cookieName is the session cookie.
	cookieName = "gatekeeper_console"
	// sessionTTL is how long a session lasts.
	sessionTTL = 12 * time.Hour
	// maxSessions bounds the sessions held; the oldest goes first.
	maxSessions = 64
	// codeTTL is how long a one-time login code is valid.
	codeTTL = 15 * time.Minute
	// maxCodes bounds the unused one-time codes held.
	maxCodes = 16
	// loginBurst failed logins are allowed at once, then one per
	// loginRefill: a wrong guess of the 256-bit token costs that much time.
	loginBurst  = 10
	loginRefill = 6 * time.Second
)

// auth holds the console's sessions, one-time login codes and the failed
// login budget. It is safe for concurrent use.
type auth struct {
	token []byte
	now   func() time.Time

	mu       sync.Mutex
	sessions map[string]time.Time // id -> expiry
	codes    map[string]time.Time // one-time code -> expiry
	budget   float64              // failed logins allowed now
	budgetAt time.Time
}

func newAuth(token string, now func() time.Time) *auth {
	return &auth{token: []byte(token), now: now, sessions: map[string]time.Time{}, codes: map[string]time.Time{}, budget: loginBurst, budgetAt: now()}
}

func randomID() string {
	b := make([]byte, 32)
	_, _ = rand.Read(b) // crypto/rand never fails on supported platforms
	return hex.EncodeToString(b)
}

// refill adds the failed-login budget earned since the last look. a.mu is held.
func (a *auth) refill() {
	now := a.now()
	a.budget = min(loginBurst, a.budget+float64(now.Sub(a.budgetAt))/float64(loginRefill))
	a.budgetAt = now
}

// login checks one login attempt: ok reports whether secret matched (via
// match); limited reports that the failed-login budget is spent, in which
// case the attempt is refused whatever it held, retry saying when to try
// again.
func (a *auth) login(match func() bool) (session string, limited bool, retry time.Duration) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.refill()
	if a.budget < 1 {
		return "", true, time.Duration((1 - a.budget) * float64(loginRefill))
	}
	if !match() {
		a.budget--
		return "", false, 0
	}
	return a.newSession(), false, 0
}

// newSession makes a session. a.mu is held.
func (a *auth) newSession() string {
	now := a.now()
	for id, exp := range a.sessions {
		if !now.Before(exp) {
			delete(a.sessions, id)
		}
	}
	if len(a.sessions) >= maxSessions {
		oldest, at := "", time.Time{}
		for id, exp := range a.sessions {
			if oldest == "" || exp.Before(at) {
				oldest, at = id, exp
			}
		}
		delete(a.sessions, oldest)
	}
	id := randomID()
	a.sessions[id] = now.Add(sessionTTL)
	return id
}

// loginToken is a login with the sidecar's token.
func (a *auth) loginToken(token string) (string, bool, time.Duration) {
	return a.login(func() bool { return subtle.ConstantTimeCompare([]byte(token), a.token) == 1 })
}

// loginCode is a login with a one-time code, which it uses up.
func (a *auth) loginCode(code string) (string, bool, time.Duration) {
	return a.login(func() bool {
		exp, ok := a.codes[code]
		delete(a.codes, code)
		return ok && code != "" && a.now().Before(exp)
	})
}

func (a *auth) newCode() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	now := a.now()
	for c, exp := range a.codes {
		if !now.Before(exp) || len(a.codes) >= maxCodes {
			delete(a.codes, c)
		}
	}
	code := randomID()
	a.codes[code] = now.Add(codeTTL)
	return code
}

func (a *auth) logout(id string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.sessions, id)
}

// valid reports whether r carries a live session cookie or the bearer token.
func (a *auth) valid(r *http.Request) bool {
	if h := r.Header.Get("Authorization"); h != "" {
		tok, ok := strings.CutPrefix(h, "Bearer ")
		return ok && subtle.ConstantTimeCompare([]byte(strings.TrimSpace(tok)), a.token) == 1
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return false
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	exp, ok := a.sessions[ck.Value]
	return ok && a.now().Before(exp)
}

// sessionCookie is the cookie a login sets: HttpOnly, SameSite=Strict,
// Secure over TLS, scoped to /ui/.
func sessionCookie(r *http.Request, id string, maxAge int) *http.Cookie {
	return &http.Cookie{Name: cookieName, Value: id, Path: "/ui/", MaxAge: maxAge, HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil}
}

// crossOrigin returns why r comes from another origin, or "". A browser
// tells with Sec-Fetch-Site (same-origin, or none for what the user typed)
// and Origin (on every POST and cross-origin request); a request without
// either is not a browser's and needs the token or a cookie all the same.
func crossOrigin(r *http.Request) string {
	if s := r.Header.Get("Sec-Fetch-Site"); s != "" && s != "same-origin" && s != "none" {
		return "Sec-Fetch-Site is " + s
	}
	if o := r.Header.Get("Origin"); o != "" {
		scheme := "http"
		if r.TLS != nil {
			scheme = "https"
		}
		if o != scheme+"://"+r.Host {
			return "Origin " + o + " is not this console's"
		}
	}
	return ""
}

// foreignHost reports whether r, arriving over TCP, names a Host that is
// not loopback: a page of another site whose name was rebound to this
// machine's address.
func foreignHost(r *http.Request) bool {
	if _, _, err := net.SplitHostPort(r.RemoteAddr); err != nil {
		return false // a Unix socket: no browser is on it
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	return !server.IsLoopback(strings.Trim(host, "[]"))
}
