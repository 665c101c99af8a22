package auth

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// TestVerifyRequest: a signed request verifies once; the same token with
// another path, query or body does not, and a body over the limit is
// refused before its token is looked at.
func TestVerifyRequest(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	signed := func(method, target, body string) *http.Request {
		r := httptest.NewRequest(method, target, strings.NewReader(body))
		if err := s.SignRequest(r, []byte(body)); err != nil {
			t.Fatal(err)
		}
		return r
	}
	with := func(r *http.Request, method, target, body string) *http.Request {
		c := httptest.NewRequest(method, target, strings.NewReader(body))
		c.Header = r.Header.Clone()
		return c
	}
	r := signed(http.MethodPost, "/v1/request", `{"a":1}`)
	for name, tc := range map[string]struct {
		r    *http.Request
		max  int64
		want error
	}{
		"other body":    {with(r, http.MethodPost, "/v1/request", `{"a":2}`), 1 << 10, ErrBadSignature},
		"other path":    {with(r, http.MethodPost, "/v1/release", `{"a":1}`), 1 << 10, ErrBadSignature},
		"other method":  {with(r, http.MethodPut, "/v1/request", `{"a":1}`), 1 << 10, ErrBadSignature},
		"no token":      {httptest.NewRequest(http.MethodPost, "/v1/request", strings.NewReader(`{"a":1}`)), 1 << 10, ErrMissingToken},
		"body too long": {with(r, http.MethodPost, "/v1/request", strings.Repeat("x", 100)), 10, ErrBodyTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			if _, err := s.VerifyRequest(tc.r, tc.max); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
		})
	}
	q := signed(http.MethodGet, "/v1/events?after=3", "")
	if _, err := s.VerifyRequest(with(q, http.MethodGet, "/v1/events?after=0", ""), 1<<10); !errors.Is(err, ErrBadSignature) {
		t.Fatalf("another query: %v", err)
	}
	body, err := s.VerifyRequest(r, 1<<10)
	if err != nil || string(body) != `{"a":1}` {
		t.Fatalf("the signed request: %q, %v", body, err)
	}
	if _, err := s.VerifyRequest(with(r, http.MethodPost, "/v1/request", `{"a":1}`), 1<<10); !errors.Is(err, ErrReplayed) {
		t.Fatalf("the same request again: %v, want %v", err, ErrReplayed)
	}
}
