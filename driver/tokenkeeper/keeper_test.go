package tokenkeeper

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/syncbuf"
)

// fakeClock is a clock the test moves.
type fakeClock struct{ now time.Time }

func (c *fakeClock) Now() time.Time { return c.now }

func (c *fakeClock) After(time.Duration) <-chan time.Time { return nil }

// fakeNamenode is a delegation-token secret manager on the fake clock, as
// a namenode's: tokens expire renewInterval after issue or renewal, never
// after their maximum date, and cancelled ones are gone.
type fakeNamenode struct {
	clock         *fakeClock
	renewInterval time.Duration
	maxLifetime   time.Duration
	failRenewals  int // the next renewals to fail

	seq       int32
	expiry    map[int32]time.Time
	cancelled map[int32]bool
	obtained  int
	renewed   int
}

func newFakeNamenode(clock *fakeClock, renew, max time.Duration) *fakeNamenode {
	return &fakeNamenode{clock: clock, renewInterval: renew, maxLifetime: max, expiry: map[int32]time.Time{}, cancelled: map[int32]bool{}}
}

func (n *fakeNamenode) issue(uri string) hadooprpc.Token {
	n.seq++
	now := n.clock.now
	id := hadooprpc.DelegationTokenIdentifier{Owner: "alice", Renewer: "alice", IssueDate: now, MaxDate: now.Add(n.maxLifetime), SequenceNumber: n.seq}
	n.expiry[n.seq] = now.Add(n.renewInterval)
	return hadooprpc.Token{Identifier: id.Marshal(), Password: []byte("secret-password"), Kind: hadooprpc.KindHDFSDelegationToken, Service: strings.TrimPrefix(uri, "hdfs://")}
}

func (n *fakeNamenode) Obtain(ctx context.Context) (map[string]hadooprpc.Token, error) {
	n.obtained++
	return map[string]hadooprpc.Token{"hdfs://nn1:8020": n.issue("hdfs://nn1:8020"), "hdfs://nn2:8020": n.issue("hdfs://nn2:8020")}, nil
}

func (n *fakeNamenode) Renew(ctx context.Context, uri string, tok hadooprpc.Token) (time.Time, error) {
	id, _ := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
	if !n.alive(tok) {
		return time.Time{}, fmt.Errorf("%s is expired", id)
	}
	if n.failRenewals > 0 {
		n.failRenewals--
		return time.Time{}, errors.New("namenode unreachable")
	}
	exp := n.clock.now.Add(n.renewInterval)
	if exp.After(id.MaxDate) {
		exp = id.MaxDate
	}
	n.expiry[id.SequenceNumber] = exp
	n.renewed++
	return exp, nil
}

func (n *fakeNamenode) Cancel(ctx context.Context, uri string, tok hadooprpc.Token) error {
	id, _ := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
	n.cancelled[id.SequenceNumber] = true
	return nil
}

// alive says whether the namenode takes tok now.
func (n *fakeNamenode) alive(tok hadooprpc.Token) bool {
	id, _ := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
	return !n.cancelled[id.SequenceNumber] && !n.clock.now.After(n.expiry[id.SequenceNumber])
}

// TestTokenKeeper drives the keeper's schedule on a fake clock: each step
// moves the clock to the keeper's next action and does it. The executors'
// tokens (as the driver would hand them out) must be alive at every step
// until the end the case allows, each renewal must come before the
// token's deadline, fresh tokens before three quarters of the maximum
// lifetime, and old tokens are cancelled only once the executors use the
// new ones.
func TestTokenKeeper(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name         string
		renew, max   time.Duration
		keytab       bool
		failRenewals int
		horizon      time.Duration
		// want
		liveUntil   time.Duration // the executors' tokens work until then
		minRenewals int
		minFresh    int
		warns       int
	}{
		{name: "no keytab: renewed up to the maximum lifetime, warned once", renew: 10 * time.Second, max: 60 * time.Second,
			horizon: 2 * time.Minute, liveUntil: 60 * time.Second, minRenewals: 2 * 5, warns: 1},
		{name: "keytab: fresh tokens before three quarters of the lifetime", renew: 4 * time.Second, max: 42 * time.Second, keytab: true,
			horizon: 5 * time.Minute, liveUntil: 5 * time.Minute, minRenewals: 100, minFresh: 9},
		{name: "keytab, renewal interval as long as the lifetime", renew: time.Hour, max: time.Hour, keytab: true,
			horizon: 6 * time.Hour, liveUntil: 6 * time.Hour, minFresh: 7},
		{name: "failed renewals are retried before the deadline", renew: 10 * time.Second, max: 60 * time.Second, failRenewals: 3,
			horizon: 40 * time.Second, liveUntil: 40 * time.Second, minRenewals: 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			clock := &fakeClock{now: start}
			nn := newFakeNamenode(clock, tc.renew, tc.max)
			tokens, _ := nn.Obtain(context.Background())
			nn.obtained = 0
			var logs syncbuf.Buffer
			k, err := New(tokens, nn, clock, tc.keytab, slog.New(slog.NewTextHandler(&logs, nil)))
			if err != nil {
				t.Fatal(err)
			}
			nn.failRenewals = tc.failRenewals
			ctx := context.Background()
			steps := 0
			usedGen, heldGen := int64(1), int64(1)
			// Executors move to a new generation lag after it appears
			// (their next heartbeat); until then they use the one before,
			// which must live on: past its renewal deadline (a quarter of
			// the renewal interval after the fresh tokens at most), within
			// its maximum lifetime (a quarter of it).
			lag := tc.max / 5
			var switchAt time.Time
			for {
				k.mu.Lock()
				at, act := k.next()
				k.mu.Unlock()
				if act.kind == actNone || at.Sub(start) > tc.horizon {
					break
				}
				if !switchAt.IsZero() && !switchAt.After(at) {
					clock.now = switchAt
					for _, g := range append(append([]tokenGen(nil), k.old...), k.cur) {
						if g.gen != usedGen {
							continue
						}
						for uri, kt := range g.tokens {
							if !nn.alive(kt.tok) && switchAt.Sub(start) <= tc.liveUntil {
								t.Fatalf("at +%v the token for %s of generation %d, which the executors still use, is dead", switchAt.Sub(start), uri, g.gen)
							}
						}
					}
					usedGen, switchAt = heldGen, time.Time{}
					k.CredentialsInUse(usedGen)
					continue
				}
				if at.Before(clock.now) {
					t.Fatalf("step %d: %v due at %v, before now %v", steps, act.kind, at, clock.now)
				}
				clock.now = at
				// What the executors hold works until the action is done:
				// the newest generation, and the one before until they
				// said they moved on.
				if at.Sub(start) <= tc.liveUntil {
					for _, g := range append(append([]tokenGen(nil), k.old...), k.cur) {
						if g.gen < usedGen {
							continue
						}
						for uri, kt := range g.tokens {
							if !nn.alive(kt.tok) {
								t.Fatalf("at +%v (before %v) the executors' token for %s (generation %d, executors use %d) is dead", at.Sub(start), act.kind, uri, g.gen, usedGen)
							}
						}
					}
				}
				a2 := k.step(ctx)
				if testing.Verbose() {
					t.Logf("+%v %v gen %d %s (used %d held %d switch %v)", clock.now.Sub(start), a2.kind, a2.gen, a2.uri, usedGen, heldGen, switchAt.Sub(start))
				}
				if g := k.ExecutorCredentials().GetGeneration(); g > heldGen {
					heldGen = g
					if switchAt.IsZero() {
						switchAt = clock.now.Add(lag)
					}
				}
				steps++
				if steps > 10000 {
					t.Fatal("the keeper does not settle")
				}
			}
			if nn.renewed < tc.minRenewals {
				t.Errorf("%d renewals, want at least %d", nn.renewed, tc.minRenewals)
			}
			if nn.obtained < tc.minFresh {
				t.Errorf("%d fresh fetches, want at least %d", nn.obtained, tc.minFresh)
			}
			if !tc.keytab && nn.obtained > 0 {
				t.Errorf("fresh tokens without a keytab")
			}
			if got := strings.Count(logs.String(), "near their maximum lifetime"); got != tc.warns {
				t.Errorf("%d lifetime warnings, want %d:\n%s", got, tc.warns, logs.String())
			}
			if tc.keytab {
				// Every generation but the newest two was cancelled, once
				// the executors moved on.
				if len(nn.cancelled) < 2*(nn.obtained-1) {
					t.Errorf("%d tokens cancelled, want at least %d (every replaced generation the executors left)", len(nn.cancelled), 2*(nn.obtained-1))
				}
			}
			if strings.Contains(logs.String(), "secret-password") {
				t.Fatal("a token's password is in the log")
			}
			k.CancelAll(ctx)
			for uri, kt := range tokens {
				if nn.alive(kt) {
					t.Errorf("token for %s alive after cancelAll", uri)
				}
			}
		})
	}
}

// TestTokenKeeperWaitsForExecutors: replaced tokens stay until every
// executor uses the new generation.
func TestTokenKeeperWaitsForExecutors(t *testing.T) {
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	nn := newFakeNamenode(clock, time.Hour, time.Hour)
	tokens, _ := nn.Obtain(context.Background())
	k, err := New(tokens, nn, clock, true, slog.New(slog.NewTextHandler(&syncbuf.Buffer{}, nil)))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for k.ExecutorCredentials().GetGeneration() < 3 {
		k.mu.Lock()
		at, _ := k.next()
		k.mu.Unlock()
		clock.now = at
		k.step(ctx)
	}
	if len(nn.cancelled) != 0 {
		t.Fatalf("%d tokens cancelled while executors may use them", len(nn.cancelled))
	}
	k.CredentialsInUse(2)
	k.mu.Lock()
	_, act := k.next()
	k.mu.Unlock()
	if act.kind != actCancel {
		t.Fatalf("next action %v, want cancel", act.kind)
	}
	k.step(ctx)
	if len(nn.cancelled) != 2 || len(k.old) != 1 || k.old[0].gen != 2 {
		t.Fatalf("cancelled %d tokens, kept generations %v: want generation 1's 2 cancelled and 2 kept", len(nn.cancelled), k.old)
	}
}
