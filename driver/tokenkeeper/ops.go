package tokenkeeper

import (
	"cmp"
	"context"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// ResolverOps are a keeper's calls to the namenodes, through the
// resolver of the newest login.
type ResolverOps struct {
	opts    fsys.Options // a new login's: the keytab
	uris    []string     // hdfs://authority of each cluster
	renewer string
	// fetch bounds getting one token (zero: DefaultTimeouts().Fetch).
	fetch time.Duration

	mu  sync.Mutex
	r   *fsys.Resolver
	own *fsys.Resolver // r, when made here (closed when replaced)
}

var _ Ops = (*ResolverOps)(nil)

// NewResolverOps returns the calls of a keeper of tokens from the clusters
// uris (hdfs://authority), renewable by renewer, made through r until
// the first fresh login; opts (a keytab's) log in again for fresh tokens.
func NewResolverOps(r *fsys.Resolver, opts fsys.Options, uris []string, renewer string) *ResolverOps {
	opts.NoTokens = true
	return &ResolverOps{opts: opts, uris: uris, renewer: renewer, r: r}
}

// Fetch obtains a token from every cluster through r.
func (o *ResolverOps) Fetch(ctx context.Context, r *fsys.Resolver) (map[string]hadooprpc.Token, error) {
	out := map[string]hadooprpc.Token{}
	for _, uri := range o.uris {
		tctx, cancel := context.WithTimeout(ctx, cmp.Or(o.fetch, DefaultTimeouts().Fetch))
		tok, err := r.DelegationToken(tctx, uri+"/", o.renewer)
		cancel()
		if err != nil {
			return nil, err
		}
		out[uri] = tok
	}
	return out, nil
}

// Obtain logs in again from the keytab (a new resolver logs in afresh:
// a new ticket-granting ticket, new namenode connections) and gets fresh
// tokens; later renewals and cancellations go through that login.
func (o *ResolverOps) Obtain(ctx context.Context) (map[string]hadooprpc.Token, error) {
	r := fsys.NewResolver(o.opts)
	tokens, err := o.Fetch(ctx, r)
	if err != nil {
		r.Close()
		return nil, err
	}
	o.mu.Lock()
	old := o.own
	o.r, o.own = r, r
	o.mu.Unlock()
	if old != nil {
		old.Close()
	}
	return tokens, nil
}

func (o *ResolverOps) current() *fsys.Resolver {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.r
}

// Renew extends tok's life through the newest login.
func (o *ResolverOps) Renew(ctx context.Context, uri string, tok hadooprpc.Token) (time.Time, error) {
	return o.current().RenewDelegationToken(ctx, uri+"/", tok)
}

// Cancel ends tok's life through the newest login.
func (o *ResolverOps) Cancel(ctx context.Context, uri string, tok hadooprpc.Token) error {
	return o.current().CancelDelegationToken(ctx, uri+"/", tok)
}

// Close closes the resolver made here, if any.
func (o *ResolverOps) Close() {
	o.mu.Lock()
	own := o.own
	o.r, o.own = nil, nil
	o.mu.Unlock()
	if own != nil {
		own.Close()
	}
}
