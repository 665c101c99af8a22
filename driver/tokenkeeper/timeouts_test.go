package tokenkeeper

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// deadlineOps records how long each renewal was given.
type deadlineOps struct {
	*fakeNamenode
	renewBound time.Duration
}

func (o *deadlineOps) Renew(ctx context.Context, uri string, tok hadooprpc.Token) (time.Time, error) {
	if dl, ok := ctx.Deadline(); ok {
		o.renewBound = time.Until(dl)
	}
	return o.fakeNamenode.Renew(ctx, uri, tok)
}

// TestTimeoutsFromConfig: the keeper's bounds default to the values they
// had as literals, zero fields take them, and a renewal is bounded by the
// keeper's configured Renew.
func TestTimeoutsFromConfig(t *testing.T) {
	want := Timeouts{Fetch: 30 * time.Second, Renew: 30 * time.Second, Cancel: 10 * time.Second, Refresh: time.Minute, Close: 30 * time.Second}
	if got := (Timeouts{}).withDefaults(); got != want {
		t.Fatalf("zero: %+v, want %+v", got, want)
	}
	clock := &fakeClock{now: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)}
	ops := &deadlineOps{fakeNamenode: newFakeNamenode(clock, time.Hour, 2*time.Hour)}
	tokens, _ := ops.Obtain(context.Background())
	k, err := New(tokens, ops, clock, false, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	if k.timeouts != want {
		t.Fatalf("New's bounds %+v, want the defaults %+v", k.timeouts, want)
	}
	k.timeouts.Renew = 50 * time.Millisecond
	k.step(context.Background()) // the first step renews each token
	if ops.renewBound <= 0 || ops.renewBound > 50*time.Millisecond {
		t.Fatalf("a renewal was given %v, want at most the configured 50ms", ops.renewBound)
	}
}
