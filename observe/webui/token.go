package webui

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"net/http"
	"strings"
)

// tokenCookie carries the UI's access token once a browser opened the
// link with ?token=.
const tokenCookie = "spindle_ui_token"

// NewToken returns a random access token for a web UI.
func NewToken() string {
	b := make([]byte, 24)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// RequireToken lets through only requests that carry token: as
// "authorization: Bearer TOKEN", as the cookie a browser is given when
// it opens the printed link (?token=TOKEN, then redirected to the same
// page without it, so the token stays out of the address bar and
// history), or in that query. An empty token requires nothing.
func RequireToken(token string, next http.Handler) http.Handler {
	if token == "" {
		return next
	}
	want := []byte(token)
	match := func(got string) bool { return subtle.ConstantTimeCompare([]byte(got), want) == 1 }
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth, ok := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer "); ok && match(auth) {
			next.ServeHTTP(w, r)
			return
		}
		if c, err := r.Cookie(tokenCookie); err == nil && match(c.Value) {
			next.ServeHTTP(w, r)
			return
		}
		if q := r.URL.Query(); match(q.Get("token")) {
			http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode})
			if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") && r.URL.Path != "/metrics" {
				q.Del("token")
				u := *r.URL
				u.RawQuery = q.Encode()
				// Relative (http.Redirect would make it absolute), so that
				// it works under a proxy's path prefix.
				w.Header().Set("Location", "./"+lastSegment(u.Path)+querySuffix(u.RawQuery))
				w.WriteHeader(http.StatusSeeOther)
				return
			}
			next.ServeHTTP(w, r)
			return
		}
		w.Header().Set("WWW-Authenticate", `Bearer realm="spindle"`)
		http.Error(w, "this web UI needs its access token: open the link spindle submit printed (spindle.ui.token)", http.StatusUnauthorized)
	})
}

func lastSegment(p string) string {
	if i := strings.LastIndexByte(p, '/'); i >= 0 {
		return p[i+1:]
	}
	return p
}

func querySuffix(q string) string {
	if q == "" {
		return ""
	}
	return "?" + q
}
