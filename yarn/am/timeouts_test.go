package am

import (
	"context"
	"errors"
	"testing"
	"time"
)

// TestTimeoutsFromConfig: the allocator's zero durations take the
// documented defaults, set ones stay, and a host lookup is bounded by the
// index's configured timeout.
func TestTimeoutsFromConfig(t *testing.T) {
	d := Config{}.withDefaults()
	if d.GangTimeout != 2*time.Minute || d.HeartbeatInterval != time.Second || d.RMCallTimeout != 30*time.Second ||
		d.NMCallTimeout != 30*time.Second || d.LookupTimeout != 2*time.Second {
		t.Fatalf("defaults: %+v", d)
	}
	set := Config{GangTimeout: time.Minute, RMCallTimeout: time.Second, NMCallTimeout: 2 * time.Second, LookupTimeout: 3 * time.Second}.withDefaults()
	if set.GangTimeout != time.Minute || set.RMCallTimeout != time.Second || set.NMCallTimeout != 2*time.Second || set.LookupTimeout != 3*time.Second {
		t.Fatalf("set: %+v", set)
	}
	var deadline time.Time
	ix := newHostIndex([]string{"nm1.example.com"}, func(ctx context.Context, host string) ([]string, error) {
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("a lookup without a deadline")
		}
		deadline = dl
		return nil, errors.New("no such host")
	})
	ix.timeout = 50 * time.Millisecond
	before := time.Now()
	ix.addrs("nm2.example.com")
	after := time.Now()
	// The lookup's context began between before and after: its deadline
	// is 50 ms past a moment in between, however slow the machine.
	if deadline.Sub(before) < 50*time.Millisecond || deadline.Sub(after) > 50*time.Millisecond {
		t.Fatalf("the lookup was given until %v after the call began and %v after it ended, want the configured 50ms from a moment in between",
			deadline.Sub(before), deadline.Sub(after))
	}
}
