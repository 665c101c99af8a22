package auth

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net/http"
)

// HTTPHeader is the HTTP header that carries a request's token.
const HTTPHeader = "Spindle-Auth"

// ErrBodyTooLarge is returned by VerifyRequest for a body over its limit.
var ErrBodyTooLarge = errors.New("auth: request body too large")

// httpMethod is what a token of an HTTP request is made for: the HTTP
// method and the request URI (path and query), so a token for one call
// cannot be sent with another path or query.
func httpMethod(r *http.Request) string {
	return "HTTP " + r.Method + " " + r.URL.RequestURI()
}

func bodyDigest(body []byte) []byte {
	sum := sha256.Sum256(body)
	return sum[:]
}

// SignRequest sets r's token: one use, over its method, path, query and
// body (which must be r's whole body; nil for none).
func (s *Signer) SignRequest(r *http.Request, body []byte) error {
	tok, err := s.Token(httpMethod(r), bodyDigest(body))
	if err != nil {
		return err
	}
	r.Header.Set(HTTPHeader, tok)
	return nil
}

// VerifyRequest reads r's body (at most max bytes) and checks that r
// carries a valid, unused token over it, its method, path and query. It
// returns the body, which r no longer holds.
func (s *Signer) VerifyRequest(r *http.Request, max int64) ([]byte, error) {
	tok := r.Header.Get(HTTPHeader)
	// Nothing of the body is read for a caller without a token, or with
	// one malformed, expired or older than the server.
	if _, err := s.parse(tok); err != nil {
		return nil, err
	}
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(io.LimitReader(r.Body, max+1))
		if err != nil {
			return nil, fmt.Errorf("auth: read request body: %w", err)
		}
		if int64(len(b)) > max {
			return nil, fmt.Errorf("%w: over %d bytes", ErrBodyTooLarge, max)
		}
		body = b
	}
	if err := s.Verify(httpMethod(r), bodyDigest(body), tok); err != nil {
		return nil, err
	}
	return body, nil
}

// bodyReader is a request body of bytes already read.
func bodyReader(b []byte) io.ReadCloser { return io.NopCloser(bytes.NewReader(b)) }

// RequireSigned wraps h so that it serves only requests carrying a valid,
// unused token of s over the request (VerifyRequest, bodies up to max
// bytes) and refuses the others with 401 and the JSON body that
// refusal(err) makes.
func (s *Signer) RequireSigned(h http.Handler, max int64, refusal func(w http.ResponseWriter, code int, err error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, err := s.VerifyRequest(r, max)
		if err != nil {
			code := http.StatusUnauthorized
			if errors.Is(err, ErrBodyTooLarge) {
				code = http.StatusRequestEntityTooLarge
			}
			refusal(w, code, err)
			return
		}
		r.Body = bodyReader(body)
		h.ServeHTTP(w, r)
	})
}
