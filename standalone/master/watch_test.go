package master

import (
	"context"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

func TestWorkerGone(t *testing.T) {
	t0 := time.Unix(1000, 0)
	const grace = time.Second
	tests := []struct {
		name       string
		down, seen time.Duration // after t0; down < 0: the connection is up
		now        time.Duration
		ready      bool
		grace      time.Duration
		want       bool
	}{
		{name: "connection up", down: -1, seen: 0, now: 10 * time.Second, grace: grace},
		{name: "down and silent past the grace", down: 0, seen: -time.Second / 2, now: grace, grace: grace, want: true},
		{name: "down within the grace", down: 0, seen: -time.Second, now: grace / 2, grace: grace},
		{name: "reconnected", down: 0, seen: -time.Second, now: 2 * grace, ready: true, grace: grace},
		{name: "down but heartbeating", down: 0, seen: 1500 * time.Millisecond, now: 2 * grace, grace: grace},
		{name: "down, heartbeat stopped later", down: 0, seen: time.Second, now: 2 * grace, grace: grace, want: true},
		{name: "turned off", down: 0, seen: -time.Hour, now: time.Hour, grace: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var down time.Time
			if tt.down >= 0 {
				down = t0.Add(tt.down)
			}
			if got := workerGone(down, t0.Add(tt.seen), t0.Add(tt.now), tt.ready, tt.grace); got != tt.want {
				t.Errorf("workerGone = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestWorkerDeadBeforeTheTermIsGone: a leader that never held a
// connection to a worker (the worker died before this leader's term; here,
// it registered an address nothing listens at) declares it lost once its
// port refuses connections for WorkerGoneTimeout, not after WorkerTimeout
// (ten minutes here). A worker whose port accepts connections but which
// never answers as a worker (a host cut off looks the same to a dial that
// times out) is left to WorkerTimeout.
func TestWorkerDeadBeforeTheTermIsGone(t *testing.T) {
	g := startGroup(t, 1, false, func(c *Config) {
		c.WorkerTimeout = 10 * time.Minute
		c.WorkerGoneTimeout = testutil.Scale(300 * time.Millisecond)
	})
	closed, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	deadAddr := closed.Addr().String()
	closed.Close()
	mute, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer mute.Close()

	c := g.client()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	for id, addr := range map[string]string{"dead": deadAddr, "mute": mute.Addr().String()} {
		if err := c.Call(ctx, true, func(ctx context.Context, m pb.MasterClient) error {
			_, err := m.RegisterWorker(ctx, &pb.RegisterWorkerRequest{Id: id, Addr: addr, Incarnation: id + "-1", Cores: 1, MemoryMb: 1024})
			return err
		}); err != nil {
			t.Fatalf("register worker %s: %v", id, err)
		}
	}
	workers := func() map[string]*pb.WorkerInfo {
		st, err := c.Status(ctx)
		if err != nil {
			t.Fatalf("status: %v", err)
		}
		out := map[string]*pb.WorkerInfo{}
		for _, w := range st.Cluster.GetWorkers() {
			out[w.GetId()] = w
		}
		return out
	}
	testutil.WaitFor(t, 20*time.Second, testutil.Holds("worker dead to be declared lost", func() bool {
		return !workers()["dead"].GetAlive()
	}))
	ws := workers()
	if msg := ws["dead"].GetMessage(); !strings.Contains(msg, deadAddr+" refused the leader's connections") {
		t.Errorf("dead lost with %q, want its refused address named", msg)
	}
	if !ws["mute"].GetAlive() {
		t.Errorf("mute, whose port accepts connections, was declared lost: %s", ws["mute"].GetMessage())
	}
}

// TestStarvedLeaderForgivesTheSilence: a liveness check held up (the
// leader's host starved it, as at load 120 on two cores; liveness.HeldUp)
// moves every last heartbeat that much later, to now at most, so that the
// silence the leader could not have heard is not the workers' and
// drivers'.
func TestStarvedLeaderForgivesTheSilence(t *testing.T) {
	t0 := time.Unix(1000, 0)
	// The worker timeout is 2 s: w1 and the driver last heard 2 s before
	// the late check, w2 just before it.
	now := t0.Add(10 * time.Second)
	seen := map[string]time.Time{"w1": now.Add(-2 * time.Second), "w2": now.Add(-100 * time.Millisecond)}
	postpone(seen, 1100*time.Millisecond, now)
	if got := now.Sub(seen["w1"]); got != 900*time.Millisecond {
		t.Errorf("w1 silent for %v after the stall is forgiven, want 900ms", got)
	}
	if !seen["w2"].Equal(now) {
		t.Errorf("w2 last heard at %v, want now (%v) at the latest", seen["w2"], now)
	}
}
