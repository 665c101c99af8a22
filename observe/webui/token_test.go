package webui

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestRequireToken: without the token the UI answers 401; a bearer
// header, the printed link's ?token= (which sets a cookie and redirects
// to the page without it) and that cookie let a request through.
func TestRequireToken(t *testing.T) {
	ok := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("page")) })
	h := RequireToken("t0ken", ok)
	do := func(path string, mod func(*http.Request)) *httptest.ResponseRecorder {
		r := httptest.NewRequest("GET", path, nil)
		if mod != nil {
			mod(r)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w
	}
	if w := do("/api/jobs", nil); w.Code != http.StatusUnauthorized || !strings.Contains(w.Body.String(), "spindle.ui.token") {
		t.Fatalf("no token: %d %q", w.Code, w.Body.String())
	}
	for _, wrong := range []func(*http.Request){
		func(r *http.Request) { r.Header.Set("Authorization", "Bearer guess") },
		func(r *http.Request) { r.AddCookie(&http.Cookie{Name: tokenCookie, Value: "guess"}) },
	} {
		if w := do("/api/jobs?token=guess", wrong); w.Code != http.StatusUnauthorized {
			t.Fatalf("wrong token: %d", w.Code)
		}
	}
	if w := do("/api/jobs", func(r *http.Request) { r.Header.Set("Authorization", "Bearer t0ken") }); w.Code != 200 {
		t.Fatalf("bearer: %d", w.Code)
	}
	w := do("/jobs/j1?token=t0ken&x=1", nil)
	if w.Code != http.StatusSeeOther || w.Header().Get("Location") != "./j1?x=1" {
		t.Fatalf("link with the token: %d to %q, want a redirect to the page without it", w.Code, w.Header().Get("Location"))
	}
	cookies := w.Result().Cookies()
	if len(cookies) != 1 || cookies[0].Name != tokenCookie || !cookies[0].HttpOnly || cookies[0].SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie: %+v", cookies)
	}
	if w := do("/api/jobs", func(r *http.Request) { r.AddCookie(cookies[0]) }); w.Code != 200 || w.Body.String() != "page" {
		t.Fatalf("with the cookie: %d", w.Code)
	}
	if w := do("/", nil); RequireToken("", ok) == nil || w.Code != http.StatusUnauthorized {
		t.Fatalf("page without token: %d", w.Code)
	}
}
