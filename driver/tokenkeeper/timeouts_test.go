package tokenkeeper

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// deadlineOps records the deadline each renewal was given.
type deadlineOps struct {
	*fakeNamenode
	renewDeadline time.Time
}

func (o *deadlineOps) Renew(ctx context.Context, uri string, tok hadooprpc.Token) (time.Time, error) {
	if dl, ok := ctx.Deadline(); ok {
		o.renewDeadline = dl
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
	before := time.Now()
	k.step(context.Background()) // the first step renews each token
	after := time.Now()
	// The renewal's context began between before and after: its deadline
	// is 50 ms past a moment in between, however slow the machine.
	if dl := ops.renewDeadline; dl.Sub(before) < 50*time.Millisecond || dl.Sub(after) > 50*time.Millisecond {
		t.Fatalf("a renewal was given until %v after the step began and %v after it ended, want the configured 50ms from a moment in between",
			dl.Sub(before), dl.Sub(after))
	}
}
