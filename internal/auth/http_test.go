package auth

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
)

// countingBody counts the bytes read of a request body.
type countingBody struct {
	r io.Reader
	n int
}

func (c *countingBody) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += n
	return n, err
}

// TestVerifyRequest: a signed request verifies once; the same token with
// another path, query or body does not, a body over the limit is refused,
// and a request whose token cannot be good is refused before its body is
// read.
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
	// A token that cannot be good, whatever the body, leaves it unread.
	for name, tok := range map[string]string{"none": "", "garbage": "v4.x.y.z", "expired": "v4.1.0123456789abcdef0123456789abcdef.00"} {
		body := &countingBody{r: strings.NewReader(strings.Repeat("x", 1<<20))}
		b := httptest.NewRequest(http.MethodPost, "/v1/request", body)
		b.Header.Set(HTTPHeader, tok)
		if _, err := s.VerifyRequest(b, 64<<20); err == nil || body.n > 0 {
			t.Fatalf("token %s: %v after reading %d bytes of the body, want refused unread", name, err, body.n)
		}
	}
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
