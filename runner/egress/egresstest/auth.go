package egresstest

import (
	"crypto/subtle"
	"net/http"
	"sync/atomic"
)

// Auth is the credential a fixture server demands: Basic with User and
// Password when Bearer is empty, else "Authorization: Bearer <Bearer>".
// The zero Auth demands nothing.
type Auth struct {
	User, Password string
	Bearer         string
}

// Wrap returns h behind a: a request without the credential gets 401 with
// a WWW-Authenticate challenge (git and pip send a URL's credentials
// only after one) and is counted in refused. refused may be nil.
func (a Auth) Wrap(h http.Handler, refused *atomic.Int64) http.Handler {
	if a == (Auth{}) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if a.ok(r) {
			h.ServeHTTP(w, r)
			return
		}
		if refused != nil {
			refused.Add(1)
		}
		if a.Bearer != "" {
			w.Header().Set("WWW-Authenticate", `Bearer realm="egresstest"`)
		} else {
			w.Header().Set("WWW-Authenticate", `Basic realm="egresstest"`)
		}
		http.Error(w, "egresstest: credentials missing or wrong", http.StatusUnauthorized)
	})
}

func (a Auth) ok(r *http.Request) bool {
	if a.Bearer != "" {
		return same(r.Header.Get("Authorization"), "Bearer "+a.Bearer)
	}
	user, pass, ok := r.BasicAuth()
	return ok && same(user, a.User) && same(pass, a.Password)
}

func same(a, b string) bool { return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1 }
