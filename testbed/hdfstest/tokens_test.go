package hdfstest

import (
	"strings"
	"testing"
	"time"
)

// TestTokenLifetimes: the namenode's token secret manager, on a clock the
// test moves, takes a token for TOKEN authentication until its renewal
// deadline and refuses it after, naming it; renewal by the renewer moves
// the deadline by the configured interval, never past the configured
// maximum lifetime, after which the token is refused for good; a
// cancelled token is unknown.
func TestTokenLifetimes(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	now := start
	m := newTokenManager(2*time.Second, 5*time.Second)
	m.now = func() time.Time { return now }
	tok := m.issue("alice", "rm")
	type step struct {
		at      time.Duration // since issue
		renewAs string        // renew first, as this user ("" for no renewal)
		renewTo time.Duration // the expiry renewal returns, since issue
		renewErr,
		lookupErr string // "" when accepted
	}
	for i, s := range []step{
		{at: 0},
		{at: 1900 * time.Millisecond},
		{at: 2100 * time.Millisecond, lookupErr: "token 1 for alice (renewer rm, max date 2026-01-01T00:00:05Z) is expired"},
		{at: 2100 * time.Millisecond, renewAs: "alice", renewErr: "non-matching renewer rm", lookupErr: "is expired"},
		{at: 2200 * time.Millisecond, renewAs: "rm", renewTo: 4200 * time.Millisecond},
		{at: 4000 * time.Millisecond, renewAs: "rm", renewTo: 5 * time.Second},
		{at: 4900 * time.Millisecond},
		{at: 5100 * time.Millisecond, lookupErr: "is expired"},
		{at: 5100 * time.Millisecond, renewAs: "rm", renewErr: "after its max date", lookupErr: "is expired"},
	} {
		now = start.Add(s.at)
		if s.renewAs != "" {
			exp, err := m.renew(tok, s.renewAs)
			switch {
			case s.renewErr == "" && err != nil:
				t.Fatalf("step %d: renew at +%v as %s: %v", i, s.at, s.renewAs, err)
			case s.renewErr != "" && (err == nil || !strings.Contains(err.Error(), s.renewErr)):
				t.Fatalf("step %d: renew at +%v as %s: %v, want %q", i, s.at, s.renewAs, err, s.renewErr)
			case s.renewErr == "" && !exp.Equal(start.Add(s.renewTo)):
				t.Fatalf("step %d: renewed to +%v, want +%v", i, exp.Sub(start), s.renewTo)
			}
		}
		_, _, err := m.lookup(tok.GetIdentifier())
		switch {
		case s.lookupErr == "" && err != nil:
			t.Fatalf("step %d: at +%v the token is refused: %v", i, s.at, err)
		case s.lookupErr != "" && (err == nil || !strings.Contains(err.Error(), s.lookupErr)):
			t.Fatalf("step %d: at +%v: %v, want %q", i, s.at, err, s.lookupErr)
		}
	}
	now = start
	live := m.issue("alice", "rm")
	if _, _, err := m.lookup(live.GetIdentifier()); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	delete(m.live, 2) // as cancelDelegationToken does
	m.mu.Unlock()
	if _, _, err := m.lookup(live.GetIdentifier()); err == nil || !strings.Contains(err.Error(), "can't be found") {
		t.Fatalf("a cancelled token: %v", err)
	}
}
