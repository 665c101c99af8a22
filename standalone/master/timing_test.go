package master

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/client"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// defaultRaft restores the default Raft timeouts over fastRaft's.
func defaultRaft(c *Config) {
	d := DefaultConfig()
	c.HeartbeatTimeout, c.ElectionTimeout = d.HeartbeatTimeout, d.ElectionTimeout
	c.LeaderLeaseTimeout, c.CommitTimeout = d.LeaderLeaseTimeout, d.CommitTimeout
}

// TestDefaultRaftTimeoutsFailoverBudget checks that the default timeouts
// fit a leader failover in half a second at the median. After the leader
// dies a follower's heartbeat timer, rearmed every HeartbeatTimeout plus a
// random fraction of it, finds the leader silent after 1.5 of them on
// average; its first vote may be refused by the other follower, which still
// has the leader until its own timer fires, and the candidate retries after
// 1.5 ElectionTimeouts on average; a client learns of the new leader within
// one retry wait. The earlier defaults (1 s, 1 s) came to 3 s on this
// budget and measured 1.5-2.7 s (BenchmarkStandaloneFailover).
func TestDefaultRaftTimeoutsFailoverBudget(t *testing.T) {
	d := DefaultConfig()
	budget := d.HeartbeatTimeout*3/2 + d.ElectionTimeout*3/2 + client.MaxRetryWait
	if budget > 500*time.Millisecond {
		t.Fatalf("default raft timeouts (heartbeat %s, election %s) and the client's retry wait %s budget %s for a failover; want at most 500ms",
			d.HeartbeatTimeout, d.ElectionTimeout, client.MaxRetryWait, budget)
	}
	if d.LeaderLeaseTimeout != d.HeartbeatTimeout {
		t.Errorf("default leader lease %s: want the heartbeat timeout %s, the longest raft allows, so that a leader slowed by load does not step down",
			d.LeaderLeaseTimeout, d.HeartbeatTimeout)
	}
}

// TestNoSpuriousElectionUnderLoad runs three masters with the default Raft
// timeouts over TCP while the machine is kept busy (twice as many spinning
// processes as cores) and writes are committed all along, and checks that
// leadership never changes over the period.
//
// The claim is for that load: a deployment's master beside busy
// processes, not a machine overcommitted ten times over, where no timeout
// short enough for a sub-second failover holds (a process waits longer
// than it for a core). The machine's other work adds to the spinners, so
// the test measures the runnable tasks over the period; an election while
// they exceeded what the claim covers proves nothing either way, and the
// test says so and skips.
func TestNoSpuriousElectionUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("runs for several seconds")
	}
	if testutil.RaceDetector {
		// Three masters in one process slowed several times over, beside
		// spinning processes, do miss heartbeats: not a deployment's case.
		t.Skip("the race detector slows the masters too much for Raft's timing")
	}
	g := startGroup(t, 3, false, defaultRaft)
	l := g.leader()
	term := g.ms[l].raft.CurrentTerm()
	c := g.client()

	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	defer func() {
		cancel()
		wg.Wait()
	}()
	var load runnableMeter
	wg.Add(1)
	go func() {
		defer wg.Done()
		load.run(ctx)
	}()
	for i := 0; i < 2*runtime.NumCPU(); i++ {
		spin := exec.CommandContext(ctx, "/bin/sh", "-c", "while :; do :; done")
		if err := spin.Start(); err != nil {
			t.Fatalf("start a spinning process: %v", err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = spin.Wait()
		}()
	}

	// The period is bounded by a count of committed writes, each a Raft
	// round trip under the same load, not by the wall clock alone.
	const period, writes = 6 * time.Second, 200
	end := time.Now().Add(period)
	for n := 0; n < writes || time.Now().Before(end); n++ {
		wctx, wcancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		err := c.Call(wctx, false, func(ctx context.Context, m pb.MasterClient) error {
			name := fmt.Sprintf("load-%d", n)
			_, err := m.RegisterApp(ctx, &pb.RegisterAppRequest{Name: name, RequestId: name})
			return err
		})
		wcancel()
		if err != nil {
			t.Fatalf("write %d under load: %v", n, err)
		}
	}
	var terms int64
	var problems []string
	for i, m := range g.ms {
		terms += m.leaderTerms.Load()
		if got := m.raft.CurrentTerm(); got != term {
			problems = append(problems, fmt.Sprintf("master %s is at raft term %d, was %d: an election ran under load", g.cfgs[i].ID, got, term))
		}
	}
	if terms != 1 {
		problems = append(problems, fmt.Sprintf("%d leader terms taken up across the masters under load; want 1", terms))
	}
	if len(problems) == 0 {
		return
	}
	// The claim covers the spinners, the masters and their client, and as
	// much again of other work.
	limit := 4 * runtime.NumCPU()
	if busy := load.median(); busy > limit {
		t.Skipf("inconclusive: %s, but the machine ran a median of %d tasks at once (load average %s), more than the %d this test's claim covers",
			problems[0], busy, loadAverage(), limit)
	}
	for _, p := range problems {
		t.Error(p)
	}
	t.Logf("the machine ran a median of %d tasks at once (load average %s)", load.median(), loadAverage())
}

// runnableMeter samples how many tasks the machine runs or has ready to
// run (procs_running in /proc/stat, this process's threads included).
type runnableMeter struct {
	mu      sync.Mutex
	samples []int
}

func (r *runnableMeter) run(ctx context.Context) {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		if n, ok := procsRunning(); ok {
			r.mu.Lock()
			r.samples = append(r.samples, n)
			r.mu.Unlock()
		}
	}
}

// median is the median sample, or 0 without samples (not Linux).
func (r *runnableMeter) median() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.samples) == 0 {
		return 0
	}
	s := slices.Clone(r.samples)
	slices.Sort(s)
	return s[len(s)/2]
}

func procsRunning() (int, bool) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, false
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "procs_running "); ok {
			n, err := strconv.Atoi(strings.TrimSpace(v))
			return n, err == nil
		}
	}
	return 0, false
}

// loadAverage is the machine's one-minute load average, for messages.
func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	return strings.Fields(string(b))[0]
}

// TestBarrierTimeoutOutlastsShortElections checks that short Raft timeouts
// do not shorten a new leader's wait for its state machine to catch up,
// which a long log on a loaded machine needs.
func TestBarrierTimeoutOutlastsShortElections(t *testing.T) {
	for _, et := range []time.Duration{DefaultConfig().ElectionTimeout, 150 * time.Millisecond, 5 * time.Second} {
		c := DefaultConfig()
		c.ElectionTimeout = et
		if got := barrierTimeout(c); got < 10*time.Second || got < 10*et {
			t.Errorf("election timeout %s: barrier timeout %s, want at least 10s and ten election timeouts", et, got)
		}
	}
}
