package driver

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// A silent executor's loss waits for the cluster manager's word: a
// standalone master re-elected every second or two said "worker lost"
// after the driver's heartbeat timeout, and the job was blamed for a lost
// machine. Explained in time, the loss names the cluster manager's reason
// and is not the job's fault; unexplained, the silence fails the job once
// the grace ends; an executor heard again was not lost.
func TestSilentExecutorWaitsForTheClusterManager(t *testing.T) {
	const timeout = 6 * time.Second
	start := func(t *testing.T, grace time.Duration) (*roster, *time.Time) {
		t.Helper()
		now := time.Unix(1000, 0)
		g := newRoster([]string{"exec-0", "exec-1"})
		g.now = func() time.Time { return now }
		g.silenceGrace = grace
		register(t, g, "exec-0", "h0")
		register(t, g, "exec-1", "h1")
		now = now.Add(timeout + time.Second)
		if _, err := g.heartbeat("exec-0", nil, 0); err != nil {
			t.Fatal(err)
		}
		g.checkHeartbeats(timeout)
		if closed(g.failed) {
			t.Fatalf("the silence failed the job before the cluster manager could say why: %v", g.err())
		}
		return g, &now
	}

	t.Run("explained", func(t *testing.T) {
		g, _ := start(t, time.Hour)
		g.checkHeartbeats(timeout) // a second look starts no second wait
		explainLoss(t, g, "worker w2 (host h1) stopped heartbeating: nothing heard for 1.6s",
			"rank 1", "worker w2 (host h1) stopped heartbeating", "not the job's fault", "executor sent no heartbeat for 7s")
	})
	t.Run("unexplained", func(t *testing.T) {
		// A grace long enough that start's look comes first on a busy
		// machine (10 ms once ran out before it).
		g, _ := start(t, testutil.Scale(100*time.Millisecond))
		testutil.WaitFor(t, 10*time.Second, testutil.Holds("failure", func() bool { return closed(g.failed) }))
		var loss *lossError
		if err := g.err(); !errors.As(err, &loss) || loss.blameless || !strings.Contains(err.Error(), "rank 1 (host h1") ||
			!strings.Contains(err.Error(), "no heartbeat for 7s") {
			t.Fatalf("err = %v, want the silence of rank 1 as the job's failure", err)
		}
	})
	t.Run("heard again", func(t *testing.T) {
		g, now := start(t, 50*time.Millisecond)
		if _, err := g.heartbeat("exec-1", nil, 0); err != nil {
			t.Fatal(err)
		}
		// Silent again: a new wait, which the first one's end leaves alone.
		*now = now.Add(timeout + time.Second)
		g.silenceGrace = time.Hour
		if _, err := g.heartbeat("exec-0", nil, 0); err != nil {
			t.Fatal(err)
		}
		g.checkHeartbeats(timeout)
		// Past the first wait's end, nothing failed the job.
		deadline := time.After(testutil.Scale(200 * time.Millisecond))
		for !closed(g.failed) {
			select {
			case <-deadline:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
		t.Fatalf("a wait withdrawn by the executor's heartbeat failed the job: %v", g.err())
	})
}
