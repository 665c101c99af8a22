package tokenkeeper

import (
	"context"
	"log/slog"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// renewShare is the share of the time to a token's expiry after which the
// keeper renews it, and of a token's maximum lifetime after which it gets
// fresh tokens (with a keytab) or warns (without).
const renewShare = 0.75

// minRetry and maxRetry bound the wait before a failed renewal or a
// failed fetch of fresh tokens is tried again.
const (
	minRetry = 100 * time.Millisecond
	maxRetry = time.Minute
)

// Clock is the keeper's time: the wall clock, or a test's.
type Clock interface {
	Now() time.Time
	After(d time.Duration) <-chan time.Time
}

// WallClock is the real time.
type WallClock struct{}

// Now is time.Now.
func (WallClock) Now() time.Time { return time.Now() }

// After is time.After.
func (WallClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

// Ops are the keeper's calls to the namenodes.
type Ops interface {
	// obtain logs in again (a new ticket-granting ticket from the keytab)
	// and obtains a fresh delegation token from every cluster of the job,
	// by hdfs://authority.
	Obtain(ctx context.Context) (map[string]hadooprpc.Token, error)
	// renew extends tok's life and returns its new expiry.
	Renew(ctx context.Context, uri string, tok hadooprpc.Token) (time.Time, error)
	// cancel ends tok's life.
	Cancel(ctx context.Context, uri string, tok hadooprpc.Token) error
}

// keptToken is one cluster's token and where its renewal stands.
type keptToken struct {
	uri       string
	tok       hadooprpc.Token
	id        hadooprpc.DelegationTokenIdentifier
	expiry    time.Time // zero until the first renewal says it
	renewedAt time.Time
	retryAt   time.Time // after a failed renewal
}

// tokenGen is one generation of the executors' tokens.
type tokenGen struct {
	gen    int64
	tokens map[string]*keptToken // by hdfs://authority
}

// actionKind is what the keeper does next.
type actionKind int

const (
	actNone actionKind = iota
	actRenew
	actRefresh
	actWarn
	actCancel
)

func (a actionKind) String() string {
	return [...]string{"none", "renew", "refresh", "warn", "cancel"}[a]
}

type tokenAction struct {
	kind actionKind
	gen  int64  // for actRenew
	uri  string // for actRenew
}

// Keeper keeps the executors' HDFS delegation tokens alive for the
// life of a job: it renews each before three quarters of the time to its
// expiry, up to its maximum lifetime; with a keytab it logs in again and
// obtains fresh tokens before three quarters of that lifetime, which the
// driver sends to running executors (CredentialKeeper), and cancels the
// older ones once every executor uses the new ones; without one it warns
// in the job log, at three quarters of the lifetime, that the job will
// lose HDFS at its end. Tokens' passwords are never logged.
type Keeper struct {
	ops   Ops
	clock Clock
	fresh bool // a keytab: fresh tokens before the maximum lifetime
	log   *slog.Logger
	// timeouts bound renewing, refreshing and cancelling (New:
	// DefaultTimeouts; StartJob: JobConfig.Timeouts).
	timeouts Timeouts
	wake     chan struct{}

	mu           sync.Mutex
	cur          tokenGen
	creds        *driverpb.Credentials
	old          []tokenGen // replaced generations, not cancelled yet
	inUse        int64      // every running executor uses this generation or a newer one
	warned       bool
	refreshRetry time.Time
}

// New keeps tokens, generation 1. Their expiry is not known
// until they are renewed, so the first step renews each.
func New(tokens map[string]hadooprpc.Token, ops Ops, clock Clock, fresh bool, log *slog.Logger) (*Keeper, error) {
	k := &Keeper{ops: ops, clock: clock, fresh: fresh, log: log, wake: make(chan struct{}, 1), timeouts: DefaultTimeouts()}
	if err := k.install(1, tokens); err != nil {
		return nil, err
	}
	return k, nil
}

// install makes tokens the current generation gen. The caller holds mu
// (or owns k alone).
func (k *Keeper) install(gen int64, tokens map[string]hadooprpc.Token) error {
	g := tokenGen{gen: gen, tokens: map[string]*keptToken{}}
	creds := hadooprpc.NewCredentials()
	for uri, tok := range tokens {
		id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
		if err != nil {
			return err
		}
		g.tokens[uri] = &keptToken{uri: uri, tok: tok, id: id}
		creds.Tokens[tok.Service] = tok
	}
	file, err := creds.Marshal(hadooprpc.CredentialsWritable)
	if err != nil {
		return err
	}
	k.cur = g
	k.creds = &driverpb.Credentials{Generation: gen, File: file}
	k.warned = false
	return nil
}

// ExecutorCredentials returns the newest credentials for executors.
func (k *Keeper) ExecutorCredentials() *driverpb.Credentials {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.creds
}

// CredentialsInUse records that every running executor uses generation
// or a newer one: older tokens can be cancelled.
func (k *Keeper) CredentialsInUse(generation int64) {
	k.mu.Lock()
	changed := generation > k.inUse
	if changed {
		k.inUse = generation
	}
	k.mu.Unlock()
	if changed {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// firstLifetime returns the token of the current generation whose maximum
// lifetime ends first.
func (k *Keeper) firstLifetime() *keptToken {
	var first *keptToken
	for _, t := range k.cur.tokens {
		if first == nil || t.id.MaxDate.Before(first.id.MaxDate) || (t.id.MaxDate.Equal(first.id.MaxDate) && t.uri < first.uri) {
			first = t
		}
	}
	return first
}

// share returns the instant the share of the way from a to b.
func share(a, b time.Time, f float64) time.Time {
	return a.Add(time.Duration(float64(b.Sub(a)) * f))
}

// next returns what to do next and when. The caller holds mu.
func (k *Keeper) next() (time.Time, tokenAction) {
	var at time.Time
	act := tokenAction{}
	consider := func(t time.Time, a tokenAction) {
		if act.kind == actNone || t.Before(at) {
			at, act = t, a
		}
	}
	for _, g := range k.old {
		if g.gen < k.inUse {
			consider(k.clock.Now(), tokenAction{kind: actCancel})
		}
	}
	// Replaced generations are renewed too until they are cancelled:
	// executors use them until their next heartbeat.
	for _, g := range append(k.old, k.cur) {
		uris := make([]string, 0, len(g.tokens))
		for uri := range g.tokens {
			uris = append(uris, uri)
		}
		sort.Strings(uris)
		for _, uri := range uris {
			t := g.tokens[uri]
			renew := tokenAction{kind: actRenew, gen: g.gen, uri: uri}
			switch {
			case !t.retryAt.IsZero():
				consider(t.retryAt, renew)
			case t.expiry.IsZero():
				// Renewing tells when the token expires.
				consider(k.clock.Now(), renew)
			case t.expiry.Before(t.id.MaxDate):
				consider(share(t.renewedAt, t.expiry, renewShare), renew)
			}
		}
	}
	if first := k.firstLifetime(); first != nil {
		due := share(first.id.IssueDate, first.id.MaxDate, renewShare)
		switch {
		case k.fresh && !k.refreshRetry.IsZero():
			consider(k.refreshRetry, tokenAction{kind: actRefresh})
		case k.fresh:
			consider(due, tokenAction{kind: actRefresh})
		case !k.warned:
			consider(due, tokenAction{kind: actWarn})
		}
	}
	return at, act
}

// retryAfter is how long to wait before trying again what failed, with
// left until it is too late.
func retryAfter(left time.Duration) time.Duration {
	return min(max(left/4, minRetry), maxRetry)
}

// step does the next action, whatever its time: the caller waited for it.
func (k *Keeper) step(ctx context.Context) tokenAction {
	k.mu.Lock()
	_, act := k.next()
	k.mu.Unlock()
	switch act.kind {
	case actRenew:
		k.renewOne(ctx, act.gen, act.uri)
	case actRefresh:
		k.refresh(ctx)
	case actWarn:
		k.warn()
	case actCancel:
		k.cancelOld(ctx)
	}
	return act
}

// kept returns the token of generation gen for uri, if still kept. The
// caller holds mu.
func (k *Keeper) kept(gen int64, uri string) *keptToken {
	for _, g := range append(k.old, k.cur) {
		if g.gen == gen {
			return g.tokens[uri]
		}
	}
	return nil
}

func (k *Keeper) renewOne(ctx context.Context, gen int64, uri string) {
	k.mu.Lock()
	t := k.kept(gen, uri)
	k.mu.Unlock()
	if t == nil {
		return
	}
	rctx, cancel := context.WithTimeout(ctx, k.timeouts.Renew)
	exp, err := k.ops.Renew(rctx, uri, t.tok)
	cancel()
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.kept(gen, uri) != t {
		return // cancelled meanwhile
	}
	if err != nil {
		// Before its first renewal, the token's deadline is unknown:
		// try again soon.
		left := 4 * time.Second
		if !t.expiry.IsZero() {
			left = t.expiry.Sub(now)
		}
		t.retryAt = now.Add(retryAfter(left))
		k.log.Warn("renew an hdfs delegation token", "cluster", uri, "token", t.id.String(), "retry_in", t.retryAt.Sub(now).Round(time.Millisecond), "err", err)
		return
	}
	t.expiry, t.renewedAt, t.retryAt = exp, now, time.Time{}
	k.log.Info(MsgRenewed, "cluster", uri, "token", t.id.String(), "expires", exp.UTC().Format(time.RFC3339Nano))
}

func (k *Keeper) refresh(ctx context.Context) {
	octx, cancel := context.WithTimeout(ctx, k.timeouts.Refresh)
	tokens, err := k.ops.Obtain(octx)
	cancel()
	now := k.clock.Now()
	k.mu.Lock()
	defer k.mu.Unlock()
	if err == nil {
		prev := k.cur
		if err = k.install(prev.gen+1, tokens); err == nil {
			k.old = append(k.old, prev)
			k.refreshRetry = time.Time{}
			var names []string
			for uri, t := range k.cur.tokens {
				names = append(names, uri+" "+t.id.String())
			}
			sort.Strings(names)
			k.log.Info(MsgFresh, "generation", k.cur.gen, "tokens", strings.Join(names, "; "))
			return
		}
	}
	left := time.Duration(0)
	if first := k.firstLifetime(); first != nil {
		left = first.id.MaxDate.Sub(now)
	}
	k.refreshRetry = now.Add(retryAfter(left))
	k.log.Warn("fresh hdfs delegation tokens", "retry_in", k.refreshRetry.Sub(now).Round(time.Millisecond), "left", left.Round(time.Second), "err", err)
}

func (k *Keeper) warn() {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.warned = true
	first := k.firstLifetime()
	if first == nil {
		return
	}
	k.log.Warn("hdfs delegation tokens near their maximum lifetime: the job cannot reach HDFS after it (a keytab, --principal and --keytab, gets fresh ones)",
		"cluster", first.uri, "max_date", first.id.MaxDate.UTC().Format(time.RFC3339), "left", first.id.MaxDate.Sub(k.clock.Now()).Round(time.Second),
		"lifetime", first.id.MaxDate.Sub(first.id.IssueDate).Round(time.Second))
}

// cancelOld cancels the generations no running executor uses.
func (k *Keeper) cancelOld(ctx context.Context) {
	k.mu.Lock()
	var gone []tokenGen
	keep := k.old[:0]
	for _, g := range k.old {
		if g.gen < k.inUse {
			gone = append(gone, g)
		} else {
			keep = append(keep, g)
		}
	}
	k.old = keep
	k.mu.Unlock()
	k.cancelGens(ctx, gone)
}

func (k *Keeper) cancelGens(ctx context.Context, gens []tokenGen) {
	for _, g := range gens {
		for uri, t := range g.tokens {
			cctx, cancel := context.WithTimeout(ctx, k.timeouts.Cancel)
			if err := k.ops.Cancel(cctx, uri, t.tok); err != nil {
				k.log.Warn("cancel an hdfs delegation token", "cluster", uri, "token", t.id.String(), "err", err)
			} else {
				k.log.Info(MsgCancelled, "cluster", uri, "token", t.id.String(), "generation", g.gen)
			}
			cancel()
		}
	}
}

// Run keeps the tokens until ctx ends.
func (k *Keeper) Run(ctx context.Context) {
	for ctx.Err() == nil {
		k.mu.Lock()
		at, act := k.next()
		k.mu.Unlock()
		if act.kind == actNone {
			select {
			case <-ctx.Done():
				return
			case <-k.wake:
				continue
			}
		}
		if d := at.Sub(k.clock.Now()); d > 0 {
			select {
			case <-ctx.Done():
				return
			case <-k.wake:
				continue
			case <-k.clock.After(d):
			}
		}
		k.step(ctx)
	}
}

// CancelAll cancels every token the keeper holds, at the end of the job.
func (k *Keeper) CancelAll(ctx context.Context) {
	k.mu.Lock()
	gens := append(k.old, k.cur)
	k.old, k.cur, k.creds = nil, tokenGen{}, nil
	k.mu.Unlock()
	k.cancelGens(ctx, gens)
}
