package collective

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"fmt"
	"io"
	"sync"
	"time"
)

// Peer authentication: the proof a dialer adds to its hello, the
// listener's check of it, and the listener's proof in return (see the
// protocol comment in wire.go).
const (
	// maxClockSkew bounds how far a hello's timestamp may be from the
	// listener's clock, and so how long a nonce must be remembered.
	maxClockSkew = 5 * time.Minute
	// maxReplayEntries bounds the replay cache. Only hellos that carry a
	// valid mac are remembered, so only token holders can fill it, and
	// a job's ranks make a handful of connections per failure.
	maxReplayEntries = 4096
	// minTokenLen is the shortest peer token accepted: shorter ones are
	// guessable.
	minTokenLen = 16
	// replyLabel separates the reply mac's input from any hello's, which
	// starts with the magic and a version.
	replyLabel = "SPCL reply"
)

// authenticator signs and checks hellos with the job's peer token, and
// remembers the nonces it accepted.
type authenticator struct {
	key []byte

	mu        sync.Mutex
	seen      map[[nonceLen]byte]time.Time // nonce → when it may be forgotten
	nextPrune time.Time
}

// newAuthenticator returns an authenticator for token, or nil when token
// is empty (no authentication).
func newAuthenticator(token string) *authenticator {
	if token == "" {
		return nil
	}
	return &authenticator{key: []byte(token), seen: make(map[[nonceLen]byte]time.Time)}
}

func (a *authenticator) mac(parts ...[]byte) [macLen]byte {
	m := hmac.New(sha256.New, a.key)
	for _, p := range parts {
		m.Write(p)
	}
	var out [macLen]byte
	copy(out[:], m.Sum(nil))
	return out
}

// sign adds a fresh proof to h.
func (a *authenticator) sign(h *hello, now time.Time) error {
	p := &proof{timestamp: now.Unix()}
	if _, err := rand.Read(p.nonce[:]); err != nil {
		return fmt.Errorf("draw a handshake nonce: %w", err)
	}
	h.flags |= flagProof
	h.proof = p
	b, err := encodeHello(*h)
	if err != nil {
		return err
	}
	p.mac = a.mac(b)
	return nil
}

// verify returns why h, received by rank at time now, must be refused, or
// "". A hello that passes is remembered, so that its replay fails.
func (a *authenticator) verify(h hello, rank int, now time.Time) string {
	if h.proof == nil {
		return fmt.Sprintf("the hello carries no proof of the job's peer token, but rank %d requires one (set %s for every rank)", rank, EnvPeerToken)
	}
	b, err := encodeHello(h)
	if err != nil {
		return err.Error()
	}
	want := a.mac(b)
	if !hmac.Equal(want[:], h.proof.mac[:]) {
		return fmt.Sprintf("the hello's peer-token proof does not verify: the sender and rank %d hold different peer tokens", rank)
	}
	ts := time.Unix(h.proof.timestamp, 0)
	if skew := now.Sub(ts); skew > maxClockSkew || skew < -maxClockSkew {
		return fmt.Sprintf("the hello's timestamp %s is %s away from rank %d's clock, more than the %s allowed (synchronise the hosts' clocks)",
			ts.UTC().Format(time.RFC3339), skew.Abs().Round(time.Second), rank, maxClockSkew)
	}
	return a.remember(h.proof.nonce, ts, rank, now)
}

// remember records nonce, whose hello is stamped ts, and returns why the
// hello must be refused, or "". A nonce is kept until its timestamp falls
// out of the accepted window, after which the hello is refused anyway.
func (a *authenticator) remember(nonce [nonceLen]byte, ts time.Time, rank int, now time.Time) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if now.After(a.nextPrune) || len(a.seen) >= maxReplayEntries {
		for n, forget := range a.seen {
			if now.After(forget) {
				delete(a.seen, n)
			}
		}
		a.nextPrune = now.Add(maxClockSkew)
	}
	if _, ok := a.seen[nonce]; ok {
		return fmt.Sprintf("the hello replays one rank %d already accepted (its nonce was used before)", rank)
	}
	if len(a.seen) >= maxReplayEntries {
		return fmt.Sprintf("rank %d accepted %d handshakes within %s and remembers no more; retry later", rank, len(a.seen), maxClockSkew)
	}
	a.seen[nonce] = ts.Add(maxClockSkew)
	return ""
}

// writeReplyMAC proves to the dialer of h that this rank holds the token.
func (a *authenticator) writeReplyMAC(w io.Writer, h hello) error {
	m := a.mac([]byte(replyLabel), h.proof.mac[:])
	_, err := w.Write(m[:])
	return err
}

// readReplyMAC reads the listener's proof for the hello h this rank sent
// and reports whether it verifies.
func (a *authenticator) readReplyMAC(r io.Reader, h hello) (bool, error) {
	var got [macLen]byte
	if _, err := io.ReadFull(r, got[:]); err != nil {
		return false, err
	}
	want := a.mac([]byte(replyLabel), h.proof.mac[:])
	return hmac.Equal(want[:], got[:]), nil
}
