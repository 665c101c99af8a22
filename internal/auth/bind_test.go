package auth

import (
	"errors"
	"testing"
	"time"
)

// TestTokenBoundToAudience: a token made for one server of a secret is
// refused by another server of the same secret, and by one that binds no
// audience; streams' tokens (no request digest) too.
func TestTokenBoundToAudience(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	a, b := s.For("worker-a"), s.For("worker-b")
	for _, digest := range [][]byte{[]byte("a request"), nil} {
		tok, err := a.Token("/svc/Launch", digest)
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Verify("/svc/Launch", digest, tok); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a token for worker-a at worker-b: %v, want %v", err, ErrBadSignature)
		}
		if err := s.Verify("/svc/Launch", digest, tok); !errors.Is(err, ErrBadSignature) {
			t.Fatalf("a token for worker-a at a server of no audience: %v, want %v", err, ErrBadSignature)
		}
		if err := a.Verify("/svc/Launch", digest, tok); err != nil {
			t.Fatalf("at worker-a: %v", err)
		}
	}
}

// TestTokenOlderThanServerRefused: a server that restarted has forgotten
// the nonces it saw; a token made before it started is refused, one made
// after it (or within StartGrace) is not.
func TestTokenOlderThanServerRefused(t *testing.T) {
	client := mustSigner(t, "0123456789abcdef0123")
	before, err := client.Token("/svc/Method", nil)
	if err != nil {
		t.Fatal(err)
	}
	restarted := mustSigner(t, "0123456789abcdef0123")
	restarted.start = time.Now().Add(StartGrace + 2*time.Second)
	if err := restarted.Verify("/svc/Method", nil, before); !errors.Is(err, ErrBeforeStart) {
		t.Fatalf("a token made before the server started: %v, want %v", err, ErrBeforeStart)
	}
	client.now = func() time.Time { return restarted.start.Add(-StartGrace / 2) }
	within, err := client.Token("/svc/Method", nil)
	if err != nil {
		t.Fatal(err)
	}
	restarted.now = func() time.Time { return restarted.start.Add(time.Second) }
	if err := restarted.Verify("/svc/Method", nil, within); err != nil {
		t.Fatalf("a token within the grace: %v", err)
	}
}

// TestTokenForAnyOfAServersNames: a server known by several names takes a
// token made for any of them, and still refuses one made for another
// server or for none.
func TestTokenForAnyOfAServersNames(t *testing.T) {
	s := mustSigner(t, "0123456789abcdef0123")
	server := s.ForAny("master h1:7077", "master 10.0.0.1:7077", "master localhost:7077")
	for _, name := range []string{"master 10.0.0.1:7077", "master localhost:7077"} {
		tok, err := s.For(name).Token("/svc/Submit", []byte("req"))
		if err != nil {
			t.Fatal(err)
		}
		if err := server.Verify("/svc/Submit", []byte("req"), tok); err != nil {
			t.Errorf("a token for %q: %v", name, err)
		}
	}
	for _, other := range []*Signer{s.For("master h2:7077"), s} {
		tok, err := other.Token("/svc/Submit", []byte("req"))
		if err != nil {
			t.Fatal(err)
		}
		if err := server.Verify("/svc/Submit", []byte("req"), tok); !errors.Is(err, ErrBadSignature) {
			t.Errorf("a token for %q: %v, want %v", other.audience, err, ErrBadSignature)
		}
	}
}
