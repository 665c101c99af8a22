package driver

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// errStopped is returned to executors that call after the job stopped.
var errStopped = errors.New("driver: job stopped")

// member is one executor of the job as the driver sees it.
type member struct {
	id       string
	host     string
	ports    []uint32
	pid      int32
	rank     int
	lastSeen time.Time
	progress *driverpb.Progress

	registered bool
	exited     bool
	exitCode   int32
	signal     string
	stderrTail string
	execErr    string
}

// where names a member for error messages.
func (m *member) where() string {
	if m.registered {
		return fmt.Sprintf("rank %d (host %s, executor %s)", m.rank, m.host, m.id)
	}
	return fmt.Sprintf("executor %s", m.id)
}

// roster tracks the executors of one job: registration, ranks, heartbeats,
// exits. It is safe for concurrent use by the control-plane handlers and
// the driver's run loop.
type roster struct {
	mu        sync.Mutex
	members   map[string]*member // by executor id
	order     []string           // executor ids in rank order
	ready     chan struct{}      // closed once every member registered
	peers     []*driverpb.Peer
	stopped   bool
	stopWhy   string
	failure   error
	failed    chan struct{} // closed on the first failure
	succeeded chan struct{} // closed once every rank exited 0
	now       func() time.Time
}

func newRoster(ids []string) *roster {
	g := &roster{
		members:   make(map[string]*member, len(ids)),
		order:     append([]string(nil), ids...),
		ready:     make(chan struct{}),
		failed:    make(chan struct{}),
		succeeded: make(chan struct{}),
		now:       time.Now,
	}
	for i, id := range ids {
		g.members[id] = &member{id: id, rank: i}
	}
	return g
}

// register records an executor's announcement. Ranks follow the order of
// executor ids, so rank i always runs the splits planned for rank i.
func (g *roster) register(req *driverpb.RegisterRequest) (*member, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[req.GetExecutorId()]
	if !ok {
		return nil, fmt.Errorf("driver: unknown executor %q", req.GetExecutorId())
	}
	if g.stopped {
		return nil, errStopped
	}
	m.host = req.GetHost()
	m.ports = req.GetPorts()
	m.pid = req.GetPid()
	m.lastSeen = g.now()
	if m.registered {
		return m, nil // a retried call
	}
	m.registered = true
	for _, id := range g.order {
		if !g.members[id].registered {
			return m, nil
		}
	}
	g.peers = make([]*driverpb.Peer, len(g.order))
	for i, id := range g.order {
		o := g.members[id]
		g.peers[i] = &driverpb.Peer{Rank: int32(i), Host: o.host, Ports: o.ports, ExecutorId: id}
	}
	close(g.ready)
	return m, nil
}

// localRanks returns m's rank among the executors on its host and how many
// share that host.
func (g *roster) localRanks(m *member) (local, size int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, id := range g.order {
		o := g.members[id]
		if o.host != m.host {
			continue
		}
		if o.rank < m.rank {
			local++
		}
		size++
	}
	return local, size
}

// heartbeat records liveness and progress and says whether to stop.
func (g *roster) heartbeat(id string, p *driverpb.Progress) (stop bool, why string, err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[id]
	if !ok {
		return false, "", fmt.Errorf("driver: unknown executor %q", id)
	}
	m.lastSeen = g.now()
	if p != nil {
		m.progress = p
	}
	return g.stopped, g.stopWhy, nil
}

// exit records how an executor's training process ended.
func (g *roster) exit(r *driverpb.ExitReport) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[r.GetExecutorId()]
	if !ok {
		return fmt.Errorf("driver: unknown executor %q", r.GetExecutorId())
	}
	if m.exited {
		return nil
	}
	m.exited = true
	m.exitCode = r.GetExitCode()
	m.signal = r.GetSignal()
	m.stderrTail = r.GetStderrTail()
	m.execErr = r.GetError()
	if r.GetProgress() != nil {
		m.progress = r.GetProgress()
	}
	switch {
	case m.execErr != "":
		g.failLocked(fmt.Errorf("%s failed: %s", m.where(), m.execErr))
	case m.exitCode != 0 || m.signal != "":
		status := fmt.Sprintf("exited with status %d", m.exitCode)
		if m.signal != "" {
			status = "was killed by signal " + m.signal
		}
		msg := fmt.Sprintf("%s: training process %s", m.where(), status)
		if tail := strings.TrimRight(m.stderrTail, "\n"); tail != "" {
			msg += "; last lines of its stderr:\n    " + strings.ReplaceAll(tail, "\n", "\n    ")
		}
		g.failLocked(errors.New(msg))
	default:
		for _, o := range g.members {
			if !o.exited || o.exitCode != 0 || o.signal != "" {
				return nil
			}
		}
		select {
		case <-g.succeeded:
		default:
			close(g.succeeded)
		}
	}
	return nil
}

// executorGone handles a cluster-manager event saying an executor process
// ended or was lost. An executor that ends without having reported a clean
// exit of its training process fails the job.
func (g *roster) executorGone(ev Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[ev.ExecutorID]
	if !ok || (m.exited && ev.Kind == ExecutorExited) {
		return
	}
	if m.host == "" && ev.Host != "" {
		m.host = ev.Host
	}
	what := fmt.Sprintf("exited with status %d", ev.ExitCode)
	if ev.Kind == ExecutorLost {
		what = "was lost"
	}
	msg := fmt.Sprintf("%s %s", m.where(), what)
	if !m.registered && ev.Kind == ExecutorExited {
		msg += " before registering"
	}
	if ev.Message != "" {
		msg += ": " + ev.Message
	}
	g.failLocked(errors.New(msg))
}

// checkHeartbeats fails the job when a registered, running executor has
// been silent for longer than timeout.
func (g *roster) checkHeartbeats(timeout time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for _, id := range g.order {
		m := g.members[id]
		if m.registered && !m.exited && now.Sub(m.lastSeen) > timeout {
			g.failLocked(fmt.Errorf("%s was lost: no heartbeat for %s", m.where(), now.Sub(m.lastSeen).Round(time.Second)))
			return
		}
	}
}

// missing describes the executors that have not registered.
func (g *roster) missing() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var ids []string
	n := 0
	for _, id := range g.order {
		if g.members[id].registered {
			n++
		} else {
			ids = append(ids, id)
		}
	}
	return fmt.Sprintf("%d of %d executors registered; missing %s", n, len(g.order), strings.Join(ids, ", "))
}

// fail records the job's first failure and tells executors to stop.
func (g *roster) fail(err error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.failLocked(err)
}

func (g *roster) failLocked(err error) {
	if g.failure != nil {
		return
	}
	select {
	case <-g.succeeded:
		return
	default:
	}
	g.failure = err
	g.stopped = true
	g.stopWhy = err.Error()
	close(g.failed)
}

// stop tells executors to stop without failing the job (interrupts).
func (g *roster) stop(why string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.stopped = true
	if g.stopWhy == "" {
		g.stopWhy = why
	}
}

// err returns the first failure.
func (g *roster) err() error {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.failure
}

// rankProgress is one rank's progress at a point in time.
type rankProgress struct {
	rank    int
	host    string
	rows    int64
	batches int64
	epoch   int32
	exited  bool
}

// snapshot returns every rank's progress, in rank order.
func (g *roster) snapshot() []rankProgress {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]rankProgress, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		p := rankProgress{rank: m.rank, host: m.host, exited: m.exited}
		if m.progress != nil {
			p.rows, p.batches, p.epoch = m.progress.GetRows(), m.progress.GetBatches(), m.progress.GetEpoch()
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rank < out[j].rank })
	return out
}
