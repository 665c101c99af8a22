package driver

import (
	"cmp"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/liveness"
)

// errStopped is returned to executors that call after the job stopped.
var errStopped = errors.New("driver: job stopped")

// member is one executor of the job as the driver sees it.
type member struct {
	id   string
	host string
	// placedOn is where the cluster manager placed the executor (its
	// ExecutorStarted event's Node, else Host), as it names places.
	placedOn string
	ports    []uint32
	pid      int32
	rank     int
	role     Role
	roleRank int
	lastSeen time.Time
	progress *driverpb.Progress
	// localizing is how far the executor is in fetching and unpacking its
	// task's files, while it is (its last heartbeat said so).
	localizing *driverpb.Localizing

	registered bool
	exited     bool
	exitCode   int32
	signal     string
	stderrTail string
	execErr    string
	// stoppedAtEnd marks a process stopped because the job ended
	// successfully while it ran.
	stoppedAtEnd bool
	// replaces names the dead parameter server or lost worker this one
	// replaces; replacement numbers the worker replacements of its rank
	// (Task.Replacement), and joined is closed once it registers.
	replaces    string
	replacement int
	joined      chan struct{}
	// rejoins marks a parameter-server replacement that registered after
	// the gang started: it rejoins the running servers' ring. One that
	// registered before takes the lost server's place in the first gang.
	rejoins bool
	// lossMsg and lossBlameless are a lost worker's failure while a
	// replacement is on its way, should it not come (replaceFailed).
	lossMsg       string
	lossBlameless bool
	// left marks a worker an elastic gang went on without in place
	// (shrinkLocked): it has no rank any more.
	left bool
	// newcomer marks a worker started to grow a running elastic gang in
	// place (growinplace.go): it takes the next rank when it registers,
	// and joined is closed then. In a job with input it takes it at the
	// next epoch's end instead (growinput.go): signedIn is closed when it
	// registers, and abandoned when it will not join.
	newcomer  bool
	signedIn  chan struct{}
	abandoned chan struct{}
	// excludedAfter are the hosts the replacement keeps off.
	excludedAfter []string
	// credGen is the generation of the Hadoop credentials the executor
	// said it uses (CredentialKeeper).
	credGen int64
	// awaitingCause holds the failure of a process stopped with SIGTERM,
	// or of a silent executor, until the cluster manager says why
	// (awaitCauseLocked); silent marks the second kind, which the
	// executor's own next word withdraws (heard).
	awaitingCause string
	silent        bool
	awaits        int // counts awaitCauseLocked's waits
}

// heard notes that m's executor spoke: a loss held for its silence was
// no loss (a driver or network slow for a while). g.mu is held.
func (m *member) heard(now time.Time) {
	m.lastSeen = now
	if m.silent {
		m.silent, m.awaitingCause = false, ""
	}
}

// where names a member for error messages. In a job of workers only it
// is the rank; otherwise the role and the rank within it come first, as
// in "ps 0 (rank 3, host h1, executor exec-3)".
func (m *member) where(mixed bool) string {
	switch {
	case mixed && m.registered:
		return fmt.Sprintf("%s (rank %d, host %s, executor %s)", m.name(), m.rank, m.host, m.id)
	case mixed:
		return fmt.Sprintf("%s (executor %s)", m.name(), m.id)
	case m.registered:
		return fmt.Sprintf("rank %d (host %s, executor %s)", m.rank, m.host, m.id)
	}
	return fmt.Sprintf("executor %s", m.id)
}

// name is the member's role and rank within it, as in "worker 1" or
// "chief".
func (m *member) name() string {
	if m.role == RoleChief {
		return string(RoleChief)
	}
	return fmt.Sprintf("%s %d", m.role, m.roleRank)
}

// roster tracks the executors of one job: registration, ranks, heartbeats,
// exits, and which of them decide the job's end. It is safe for concurrent
// use by the control-plane handlers and the driver's run loop.
//
// The job succeeds when its chief exits 0 or, without a chief, when every
// worker has. Executors still running then (parameter servers, which
// never end on their own, and workers a chief left behind) are told to
// stop, and their end is not a failure. Before that, any executor that
// fails fails the job.
type roster struct {
	mu        sync.Mutex
	members   map[string]*member // by executor id
	order     []string           // executor ids in rank order
	ready     chan struct{}      // closed once every member registered
	peers     []*driverpb.Peer
	hasChief  bool
	mixed     bool // the job has roles other than worker
	stopped   bool
	stopWhy   string
	finished  bool // the job succeeded; stopping is its normal end
	failure   error
	failed    chan struct{} // closed on the first failure
	succeeded chan struct{} // closed when the job succeeded
	allExited chan struct{} // closed once every member reported its exit
	now       func() time.Time
	// credScan is when useCredentials last looked at every member.
	credScan time.Time
	// joined counts the members of the first gang that registered, so a
	// registration need not look at every member (scale.go).
	joined int
	// onHost holds each host's ranks in rank order, built once when it
	// is first asked for and dropped when a replacement registers.
	onHost map[string][]int

	// psSpares is how many parameter servers may die without failing the
	// job: Spindle's own servers keep that many backups of every row
	// (spindle.ps.replicas). onPSLost hears of each such death.
	psSpares int
	psLost   int
	onPSLost func(msg string)
	// lost carries each such server, and each worker replaceLocked
	// replaces, to the driver, which starts a replacement; replaced
	// numbers the replacements.
	lost     chan *member
	replaced int
	// replaceWorkers makes a lost worker leave the others running while
	// one new executor takes its rank (replaceLocked); replacing is the
	// lost worker until its replacement registered and settle passed
	// (replaceSettle; tests shorten it). budget counts each
	// replacement against the job's restarts (false: none left), and
	// onReplace hears of each.
	replaceWorkers bool
	replacing      *member
	settle         time.Duration
	budget         func(loss *lossError) (note string, excluded []string, ok bool)
	onReplace      func(rank int, msg string)
	// shrinkWorkers makes a lost worker of an elastic gang leave the
	// others running in a smaller world, down to minWorkers
	// (shrinkLocked); shrinking is the lost worker until settle passed.
	// onShrink hears of each, with the new world's size.
	shrinkWorkers bool
	minWorkers    int
	shrinking     *member
	onShrink      func(rank, world int, msg string)
	// shrinkOnce lets the generation go on in place only once (a job
	// with input: its feeds are dealt one lost rank's rest), and
	// onLeftBehind hears of it with the lost worker's id, old rank and
	// loss, the new membership's version and the survivors' ids.
	shrinkOnce bool
	shrinks    int
	// replanned marks a generation whose feeds follow a plan of their
	// own since a newcomer joined at an epoch's end (growinput.go): a lost
	// rank's rest, dealt from the generation's plan, would be wrong, so
	// it restarts the gang instead.
	replanned    bool
	onLeftBehind func(id string, rank int, version int64, survivors []string, loss error)
	// growWorkers lets newcomers join the running gang in place, up to
	// maxWorkers (growinplace.go); growing is the newcomer until it
	// registered and settle passed, and onGrow hears of each that joined.
	growWorkers bool
	// growAtEpochs makes newcomers join at an epoch's end, where the
	// feeds of a job with input change plans (growinput.go).
	growAtEpochs bool
	maxWorkers   int
	growing      *member
	onGrow       func(who string, world int)
	// onExitedWell hears of each worker whose process exited 0.
	onExitedWell func(id string)
	// causeGrace is how long a SIGTERMed process's failure waits for the
	// cluster manager's reason (the constant causeGrace; tests shorten it).
	causeGrace time.Duration
	// silenceGrace is how long a silent executor's loss waits for the
	// cluster manager's reason; zero waits as long as the heartbeat
	// timeout (tests shorten it).
	silenceGrace time.Duration
	// rootCauseGrace is how long a failed exit waits for another rank's
	// executor error (the driver sets the constant rootCauseGrace; zero
	// fails at once), and held is the failure waiting meanwhile.
	rootCauseGrace time.Duration
	held           error
	// membership is who holds each rank for the collectives once a
	// worker was replaced alone (membership.go); nil before.
	membership *driverpb.Membership
}

// spareLocked says whether m's death leaves the job running: m is a
// parameter server whose rows live on in their backups. g.mu is held.
func (g *roster) spareLocked(m *member, msg string) bool {
	if m.role != RolePS || g.psLost >= g.psSpares {
		return false
	}
	g.psLost++
	if m.registered && g.peers == nil {
		// Its slot is open again until its replacement registers.
		g.joined--
	}
	m.exited = true
	if g.onPSLost != nil {
		g.onPSLost(fmt.Sprintf("%s; its keys moved to their backups (%d of %d spare servers used, spindle.ps.replicas)", msg, g.psLost, g.psSpares))
	}
	select {
	case g.lost <- m:
	default: // more deaths than the channel holds: they stay unreplaced
	}
	g.checkAllExitedLocked()
	return true
}

// addReplacement makes the member that replaces the dead parameter server
// lost, at its rank; nil when the job is ending.
func (g *roster) addReplacement(lost *member) *member {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.stopped || g.finished || g.failure != nil {
		return nil
	}
	if g.replaced >= maxPSReplacements*g.psSpares {
		return nil
	}
	g.replaced++
	base, _, _ := strings.Cut(lost.id, "-r")
	m := &member{id: fmt.Sprintf("%s-r%d", base, g.replaced), rank: lost.rank, role: lost.role, roleRank: lost.roleRank, replaces: lost.id}
	g.members[m.id] = m
	g.order[m.rank] = m.id
	return m
}

// maxPSReplacements bounds the replacements a job starts, per spare
// server: a replacement that keeps dying does not loop forever.
const maxPSReplacements = 3

// dropReplacement gives up on a replacement that could not be started.
func (g *roster) dropReplacement(m *member) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if !m.registered && !m.exited {
		m.exited = true
		g.checkAllExitedLocked()
	}
}

// peerList returns the cluster spec: every rank's address, a
// replacement's in place of the one it replaced.
func (g *roster) peerList() []*driverpb.Peer {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.peers
}

// newRoster returns the roster of a job of workers only, rank i for ids[i].
func newRoster(ids []string) *roster { return newRosterOf(workerSlots(ids)) }

// newRosterOf returns the roster of a job laid out as slots.
func newRosterOf(slots []slot) *roster {
	g := &roster{
		members:    make(map[string]*member, len(slots)),
		order:      make([]string, len(slots)),
		ready:      make(chan struct{}),
		failed:     make(chan struct{}),
		succeeded:  make(chan struct{}),
		allExited:  make(chan struct{}),
		lost:       make(chan *member, len(slots)),
		causeGrace: causeGrace,
		settle:     replaceSettle,
		now:        time.Now,
	}
	for i, s := range slots {
		g.order[i] = s.id
		g.members[s.id] = &member{id: s.id, rank: s.rank, role: s.role, roleRank: s.roleRank}
		g.hasChief = g.hasChief || s.role == RoleChief
		g.mixed = g.mixed || s.role != RoleWorker
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
	g.onHost = nil // hosts changed
	m.ports = req.GetPorts()
	m.pid = req.GetPid()
	m.lastSeen = g.now()
	if m.registered {
		return m, nil // a retried call
	}
	m.registered = true
	if m.newcomer && m.signedIn != nil {
		close(m.signedIn) // it joins at the next epoch's end (growinput.go)
		return m, nil
	}
	if m.newcomer {
		g.grewLocked(m)
		return m, nil
	}
	if m.replaces != "" && m.role == RoleWorker {
		g.joinedLocked(m)
		return m, nil
	}
	if m.replaces != "" {
		g.psLost--
		if g.peers != nil {
			// A replacement joins the running job: the others keep their
			// spec, and the replacement gets one with its own address in it.
			peers := slices.Clone(g.peers)
			peers[m.rank] = &driverpb.Peer{Rank: int32(m.rank), Host: m.host, Ports: m.ports, ExecutorId: m.id,
				Role: string(m.role), RoleRank: int32(m.roleRank)}
			g.peers = peers
			m.rejoins = true
			return m, nil
		}
		// The server it replaces was lost before the gang was complete:
		// there is no spec yet, and no ring to rejoin. It registers as a
		// member of the first gang (spareLocked uncounted the lost one).
	}
	if g.joined++; g.joined < len(g.order) || !g.allRegisteredLocked() {
		return m, nil
	}
	g.peers = make([]*driverpb.Peer, len(g.order))
	now := g.now()
	for i, id := range g.order {
		o := g.members[id]
		g.peers[i] = &driverpb.Peer{Rank: int32(i), Host: o.host, Ports: o.ports, ExecutorId: id,
			Role: string(o.role), RoleRank: int32(o.roleRank)}
		// Each waited in Register for the gang, heartbeating nothing:
		// its silence counts from now.
		o.lastSeen = now
	}
	close(g.ready)
	return m, nil
}

// localRanks returns m's rank among the executors on its host and how many
// share that host.
func (g *roster) localRanks(m *member) (local, size int) {
	g.mu.Lock()
	defer g.mu.Unlock()
	ranks := g.hostRanksLocked()[m.host]
	local, _ = slices.BinarySearch(ranks, m.rank)
	return local, len(ranks)
}

// heartbeat records liveness and progress and says whether to stop, and
// whether that stop is the job's successful end.
func (g *roster) heartbeat(id string, p *driverpb.Progress, membershipVersion int64) (*driverpb.HeartbeatResponse, error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[id]
	if !ok {
		return nil, fmt.Errorf("driver: unknown executor %q", id)
	}
	m.heard(g.now())
	if p != nil {
		m.progress = p
	}
	return &driverpb.HeartbeatResponse{Stop: g.stopped, Reason: g.stopWhy, Finished: g.finished,
		Membership: g.membershipAfterLocked(membershipVersion)}, nil
}

// setLocalizing records how far an executor is in putting its task's
// files in place; nil says it is done (or never was).
func (g *roster) setLocalizing(id string, l *driverpb.Localizing) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[id]; ok {
		m.localizing = l
	}
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
	m.heard(g.now())
	m.exited = true
	m.exitCode = r.GetExitCode()
	m.signal = r.GetSignal()
	m.stderrTail = r.GetStderrTail()
	m.execErr = r.GetError()
	if r.GetProgress() != nil {
		m.progress = r.GetProgress()
	}
	defer g.checkAllExitedLocked()
	if g.finished {
		// Stopped because the job ended: whatever it says is not a failure.
		m.stoppedAtEnd = true
		return nil
	}
	process := "training process"
	if m.role == RolePS {
		process = "parameter server"
	}
	switch {
	case m.execErr != "" && r.GetSetupError():
		g.failLocked(fmt.Errorf("%w: %s: %s", ErrConfig, m.where(g.mixed), m.execErr))
	case m.execErr != "":
		msg := fmt.Sprintf("%s failed: %s", m.where(g.mixed), m.execErr)
		if m.signal == "SIGTERM" && g.failure == nil && !g.stopped {
			// Stopped from outside while it set up: wait for the reason.
			g.awaitCauseLocked(m, msg+" (it was sent SIGTERM)", g.causeGrace)
			return nil
		}
		g.failLocked(m.loss(msg, false))
	case m.exitCode != 0 || m.signal != "":
		status := fmt.Sprintf("exited with status %d", m.exitCode)
		if m.signal != "" {
			status = "was killed by signal " + m.signal
		}
		msg := fmt.Sprintf("%s: %s %s", m.where(g.mixed), process, status)
		if m.role == RolePS {
			msg += " while the job ran"
		}
		if g.spareLocked(m, msg) {
			return nil
		}
		if tail := strings.TrimRight(m.stderrTail, "\n"); tail != "" {
			msg += "; last lines of its stderr:\n    " + strings.ReplaceAll(tail, "\n", "\n    ")
		}
		if m.signal != "SIGTERM" && g.goOnWithoutLocked(m, msg, false) {
			return nil
		}
		msg += g.whileReplacingLocked() + g.whileShrinkingLocked()
		if m.signal == "SIGTERM" && g.failure == nil && !g.stopped {
			g.awaitCauseLocked(m, msg, g.causeGrace)
			return nil
		}
		if m.signal == "" && len(g.members) > 1 && g.rootCauseGrace > 0 {
			g.failAfterLocked(m.loss(msg, false))
			return nil
		}
		g.failLocked(m.loss(msg, false))
	case m.role == RoleChief:
		g.succeedLocked("the chief ended")
	case m.role == RoleWorker && !g.hasChief:
		if g.onExitedWell != nil {
			g.onExitedWell(m.id)
		}
		for _, id := range g.order {
			o := g.members[id]
			if o.role == RoleWorker && (!o.exited || o.exitCode != 0 || o.signal != "") {
				return nil
			}
		}
		g.succeedLocked("every worker ended")
	}
	return nil
}

// succeedLocked ends the job successfully; executors still running are
// told to stop, as the job's normal end.
func (g *roster) succeedLocked(why string) {
	if g.failure != nil || g.finished {
		return
	}
	if g.held != nil {
		// A rank failed just before: the job failed.
		g.failLocked(g.held)
		return
	}
	g.finished = true
	g.stopped = true
	g.stopWhy = "the job ended: " + why
	close(g.succeeded)
}

// checkAllExitedLocked closes allExited once every member reported an exit.
func (g *roster) checkAllExitedLocked() {
	for _, m := range g.members {
		if !m.exited {
			return
		}
	}
	select {
	case <-g.allExited:
	default:
		close(g.allExited)
	}
}

// running returns the names of the members whose process has not
// reported an exit, in rank order.
func (g *roster) running() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, id := range g.order {
		if m := g.members[id]; !m.exited {
			out = append(out, m.name())
		}
	}
	return out
}

// stoppedAtEnd returns the names of the members stopped at the job's
// successful end, in rank order.
func (g *roster) stoppedAtEnd() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	var out []string
	for _, id := range g.order {
		if m := g.members[id]; m.stoppedAtEnd {
			out = append(out, m.name())
		}
	}
	return out
}

// causeGrace is how long a training process stopped with SIGTERM waits,
// before it fails the job, for the cluster manager's word on why: YARN's
// NodeManagers stop a container they take back (preempted, over its memory,
// its node leaving) with SIGTERM, and the executor's report of it usually
// arrives before the ApplicationMaster's, which has the reason and says
// whether the loss was the job's fault.
const causeGrace = 3 * time.Second

// awaitCauseLocked holds m's failure (msg) for grace, unless the cluster
// manager explains it first (executorGone). g.mu is held.
func (g *roster) awaitCauseLocked(m *member, msg string, grace time.Duration) {
	m.awaitingCause = msg
	m.awaits++
	awaits := m.awaits
	time.AfterFunc(grace, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		// Not a wait withdrawn (heard) and another begun since.
		if m.awaitingCause != "" && m.awaits == awaits {
			msg := m.awaitingCause
			m.awaitingCause = ""
			g.failLocked(m.loss(msg, false))
		}
	})
}

// rootCauseGrace is how long a training process that exited with an error
// status waits before its exit fails the job, for an error another rank's
// executor found itself (a feed that could not read its input, an expired
// delegation token) to take its place. When one rank's executor stops its
// process for such an error, the other ranks' processes often die of the
// lost peer first, and their reports arrive first: the job's error should
// name the cause, not its echo. A process killed by a signal is not held.
const rootCauseGrace = 250 * time.Millisecond

// failAfterLocked fails the job with loss after rootCauseGrace, unless
// another failure comes first; the job cannot succeed meanwhile. g.mu is
// held.
func (g *roster) failAfterLocked(loss error) {
	if g.failure != nil || g.held != nil {
		return
	}
	g.held = loss
	time.AfterFunc(g.rootCauseGrace, func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		for _, m := range g.members {
			if m.awaitingCause != "" {
				// A stopped rank waits for its reason, which fails the
				// job: the likelier cause.
				return
			}
		}
		g.failLocked(g.held)
	})
}

// executorGone handles a cluster-manager event saying an executor process
// ended or was lost. An executor that ends without having reported a clean
// exit of its training process fails the job.
func (g *roster) executorGone(ev Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	m, ok := g.members[ev.ExecutorID]
	if !ok || m.left || (m.exited && ev.Kind == ExecutorExited && m.awaitingCause == "") || g.abandonWaitingLocked(m) {
		return
	}
	if cause := m.awaitingCause; cause != "" {
		// The cluster manager says why the process was stopped.
		m.awaitingCause, m.silent = "", false
		what := fmt.Sprintf("exited with status %d", ev.ExitCode)
		if ev.Kind == ExecutorLost {
			what = "was lost"
		}
		msg := fmt.Sprintf("%s %s", m.where(g.mixed), what)
		if ev.Message != "" {
			msg += ": " + ev.Message
		}
		if ev.Blameless {
			msg += " (not the job's fault)"
		}
		msg += "; before that, its " + strings.TrimPrefix(cause, m.where(g.mixed)+": ")
		if g.goOnWithoutLocked(m, msg, ev.Blameless) {
			return
		}
		g.failLocked(m.loss(msg+g.whileReplacingLocked()+g.whileShrinkingLocked(), ev.Blameless))
		return
	}
	if g.finished {
		// Released at the job's end, or ended without reporting after the
		// driver told it to stop: either way not a failure.
		if !m.exited {
			m.exited, m.stoppedAtEnd = true, true
			g.checkAllExitedLocked()
		}
		return
	}
	if m.placedOn == "" {
		m.placedOn = cmp.Or(ev.Node, ev.Host)
	}
	if m.host == "" && ev.Host != "" {
		m.host = ev.Host
	}
	what := fmt.Sprintf("exited with status %d", ev.ExitCode)
	if ev.Kind == ExecutorLost {
		what = "was lost"
	}
	msg := fmt.Sprintf("%s %s", m.where(g.mixed), what)
	if !m.registered && ev.Kind == ExecutorExited {
		msg += " before registering"
	}
	if ev.Message != "" {
		msg += ": " + ev.Message
	}
	if !m.exited && g.spareLocked(m, msg) {
		return
	}
	if ev.Blameless {
		msg += " (not the job's fault)"
	}
	if !m.exited && g.goOnWithoutLocked(m, msg, ev.Blameless) {
		return
	}
	g.failLocked(m.loss(msg+g.whileReplacingLocked()+g.whileShrinkingLocked(), ev.Blameless))
}

// placed notes the host the cluster manager placed an executor on.
func (g *roster) placed(ev Event) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if m, ok := g.members[ev.ExecutorID]; ok {
		m.placedOn = cmp.Or(ev.Node, ev.Host)
	}
}

// checkHeartbeats fails the job when a registered, running executor has
// been silent for longer than timeout since the gang was complete, and
// the cluster manager has not said why within the silence grace (as long
// again unless set). Its word (a lost worker, node or container) says
// whether the loss was the job's fault: a standalone master re-elected
// every second or two restarts a dead worker's silence clock each time,
// and its "worker lost" came after this timeout, which then blamed the
// job for a lost machine.
func (g *roster) checkHeartbeats(timeout time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	select {
	case <-g.ready:
	default:
		// Executors that registered wait in Register for the rest of the
		// gang and send no heartbeat until it answers: a gang whose
		// containers start over longer than the timeout (a loaded
		// cluster) is no lost executor. The registration timeout bounds
		// the wait.
		return
	}
	now := g.now()
	for _, id := range g.order {
		m := g.members[id]
		if m.registered && !m.exited && m.awaitingCause == "" && now.Sub(m.lastSeen) > timeout {
			msg := fmt.Sprintf("%s: executor sent no heartbeat for %s", m.where(g.mixed), now.Sub(m.lastSeen).Round(time.Second))
			m.silent = true
			g.awaitCauseLocked(m, msg, cmp.Or(g.silenceGrace, timeout))
		}
	}
}

// forgive moves every member's last heartbeat d later (to now at most):
// the driver was held up for d and heard nobody in it.
func (g *roster) forgive(d time.Duration) {
	g.mu.Lock()
	defer g.mu.Unlock()
	now := g.now()
	for _, m := range g.members {
		m.lastSeen = liveness.Forgive(m.lastSeen, d, now)
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
	if g.failure != nil || err == nil {
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
	role    Role
	name    string // the role and rank within it, in a job with roles; else ""
	roleNum int    // the rank within its role
	host    string
	rows    int64
	batches int64
	epoch   int32
	exited  bool

	// takenRows and takenBatches are what the training process read off
	// its feed socket (rows and batches: what the executor wrote into it).
	takenRows, takenBatches int64
	// bytes is what the executor wrote into the feed socket.
	bytes int64
	// localizing is set while the executor fetches and unpacks its
	// task's files.
	localizing *driverpb.Localizing
}

// snapshot returns every rank's progress, in rank order.
func (g *roster) snapshot() []rankProgress {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make([]rankProgress, 0, len(g.order))
	for _, id := range g.order {
		m := g.members[id]
		p := rankProgress{rank: m.rank, role: m.role, roleNum: m.roleRank, host: m.host, exited: m.exited, localizing: m.localizing}
		if g.mixed {
			p.name = m.name()
		}
		if m.progress != nil {
			p.rows, p.batches, p.epoch = m.progress.GetRows(), m.progress.GetBatches(), m.progress.GetEpoch()
			p.takenRows, p.takenBatches = m.progress.GetTakenRows(), m.progress.GetTakenBatches()
			p.bytes = m.progress.GetBytes()
		}
		out = append(out, p)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].rank < out[j].rank })
	return out
}
