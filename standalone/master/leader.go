package master

import (
	"context"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/internal/liveness"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// leaderState holds what only the leader tracks, for one term: when each
// worker and driver was last heard from, the gang queue, the launches and
// stops under way. None of it is replicated; a new leader starts afresh and
// gives every worker and driver a full timeout to check in.
type leaderState struct {
	m      *Master
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	logger *slog.Logger
	sched  *scheduler

	mu         sync.Mutex
	workerSeen map[string]time.Time
	appSeen    map[string]time.Time
	// localizing are each running application's ranks still localizing,
	// as its driver's last heartbeat said (for status only).
	localizing map[string][]string
	stopping   map[string]bool // worker/app groups being stopped
	notified   map[string]bool // app/worker pairs told the app ended
	launching  map[string]int  // request ids being launched
	closed     bool            // set by stop; no goroutine starts after it
	kick       chan struct{}
	// watches are the connections watched to each alive worker, by id
	// (watch.go); only the loop touches them.
	watches map[string]workerWatch
}

// barrierTimeout bounds a new leader's wait for its state machine to apply
// everything committed before its term. A leader whose barrier fails never
// takes up its duties in that term, so the bound is generous: ten election
// timeouts, and at least ten seconds (a long log to apply on a loaded
// machine), whatever the Raft timeouts.
func barrierTimeout(cfg Config) time.Duration {
	return max(10*cfg.ElectionTimeout, 10*time.Second)
}

// startLeader takes up the leader's duties once the FSM has caught up with
// everything committed before this term.
func (m *Master) startLeader(parent context.Context) *leaderState {
	ctx, cancel := context.WithCancel(parent)
	ls := &leaderState{
		m: m, ctx: ctx, cancel: cancel,
		logger:     m.logger.With("role", "leader"),
		workerSeen: map[string]time.Time{},
		appSeen:    map[string]time.Time{},
		localizing: map[string][]string{},
		stopping:   map[string]bool{},
		notified:   map[string]bool{},
		launching:  map[string]int{},
		watches:    map[string]workerWatch{},
		kick:       make(chan struct{}, 1),
	}
	ls.sched = newScheduler(ls)
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		if err := m.raft.Barrier(barrierTimeout(m.cfg)).Error(); err != nil {
			ls.logger.Warn("leader barrier failed; waiting for the next election", "err", err)
			return
		}
		now := time.Now()
		m.fsm.read(func(s *State, _ uint64) {
			for id := range s.Workers {
				ls.workerSeen[id] = now
			}
			for id := range s.Apps {
				ls.appSeen[id] = now
			}
		})
		ls.mu.Lock()
		if ls.closed {
			ls.mu.Unlock()
			return
		}
		m.leader.Store(ls)
		ls.mu.Unlock()
		m.leaderTerms.Add(1)
		ls.logger.Info("took the lead", "term", m.raft.CurrentTerm())
		ls.goOwned(func() { ls.sched.run(ctx) })
		ls.loop(ctx)
	}()
	return ls
}

// stop ends the term's duties and waits for its goroutines.
func (ls *leaderState) stop() {
	ls.mu.Lock()
	ls.closed = true
	ls.mu.Unlock()
	ls.cancel()
	ls.wg.Wait()
}

// goOwned runs f as a goroutine owned by the term; after stop it does
// nothing. The caller must not hold ls.mu.
func (ls *leaderState) goOwned(f func()) {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	if ls.closed {
		return
	}
	ls.wg.Add(1)
	go func() {
		defer ls.wg.Done()
		f()
	}()
}

func (ls *leaderState) poke() {
	select {
	case ls.kick <- struct{}{}:
	default:
	}
}

func (ls *leaderState) tick() time.Duration {
	d := min(ls.m.cfg.WorkerTimeout, ls.m.cfg.AppTimeout) / 4
	return max(20*time.Millisecond, min(d, time.Second))
}

// loop checks liveness and drives stops until the term ends.
func (ls *leaderState) loop(ctx context.Context) {
	tick := ls.tick()
	t := time.NewTicker(tick)
	defer t.Stop()
	idle := time.Now() // when the loop last finished its work
	for {
		changed := ls.m.fsm.watch()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			now := time.Now()
			if d := liveness.HeldUp(idle, now, tick); d > 0 {
				ls.forgive(d, now)
			}
			ls.checkWorkers()
			ls.checkApps()
			ls.abandonPlacements()
			ls.syncWatches()
			ls.reconcile()
		case <-changed:
			ls.syncWatches()
			ls.reconcile()
		case <-ls.kick:
			ls.reconcile()
		}
		idle = time.Now()
	}
}

// forgive moves every worker's and driver's last heartbeat d later (now
// at most): this master was held up (a starved host, a stopped process)
// for d and heard nobody in it, so their silence in that time is its
// own, not theirs. A worker that died meanwhile is declared lost d later.
func (ls *leaderState) forgive(d time.Duration, now time.Time) {
	ls.logger.Warn("the leader's liveness checks were held up; the silence of workers and drivers in that time is not held against them",
		"held_up", d.Round(time.Millisecond))
	ls.mu.Lock()
	defer ls.mu.Unlock()
	postpone(ls.workerSeen, d, now)
	postpone(ls.appSeen, d, now)
}

// postpone moves each time in seen d later, to now at most.
func postpone(seen map[string]time.Time, d time.Duration, now time.Time) {
	for id, at := range seen {
		seen[id] = liveness.Forgive(at, d, now)
	}
}

func (ls *leaderState) sawWorker(id string) {
	ls.mu.Lock()
	ls.workerSeen[id] = time.Now()
	ls.mu.Unlock()
}

func (ls *leaderState) sawApp(id string) {
	ls.mu.Lock()
	ls.appSeen[id] = time.Now()
	ls.mu.Unlock()
}

// heardApp records an application's heartbeat: it is alive, and these of
// its ranks are still localizing (none clears what was recorded).
func (ls *leaderState) heardApp(id string, localizing []string) {
	ls.mu.Lock()
	ls.appSeen[id] = time.Now()
	if len(localizing) > 0 {
		ls.localizing[id] = localizing
	} else {
		delete(ls.localizing, id)
	}
	ls.mu.Unlock()
}

// localizingApps returns each running application's ranks still
// localizing, as their drivers last said.
func (ls *leaderState) localizingApps() map[string][]string {
	ls.mu.Lock()
	defer ls.mu.Unlock()
	out := make(map[string][]string, len(ls.localizing))
	for id, l := range ls.localizing {
		out[id] = l
	}
	return out
}

// checkWorkers declares lost every alive worker silent for too long.
func (ls *leaderState) checkWorkers() {
	now := time.Now()
	type lost struct{ id, host string }
	var gone []lost
	var silent []time.Duration
	ls.m.fsm.read(func(s *State, _ uint64) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		for _, w := range s.sortedWorkers() {
			if !w.Alive {
				continue
			}
			seen, ok := ls.workerSeen[w.ID]
			if !ok {
				ls.workerSeen[w.ID] = now
				continue
			}
			if d := now.Sub(seen); d > ls.m.cfg.WorkerTimeout {
				gone = append(gone, lost{w.ID, w.Host})
				silent = append(silent, d)
			}
		}
	})
	for i, w := range gone {
		msg := fmt.Sprintf("worker %s (host %s) stopped heartbeating: nothing heard for %s",
			w.id, w.host, silent[i].Round(100*time.Millisecond))
		if _, err := ls.m.apply(cmdWorkerLost, workerLostCmd{ID: w.id, Message: msg, TimeMS: nowMS()}); err != nil {
			ls.logger.Warn("record lost worker", "worker", w.id, "err", err)
			continue
		}
		ls.logger.Warn("worker lost", "worker", w.id, "host", w.host, "silent", silent[i].Round(time.Millisecond))
	}
}

// checkApps ends applications whose driver went silent.
func (ls *leaderState) checkApps() {
	now := time.Now()
	type quiet struct {
		id, host string
		d        time.Duration
	}
	var gone []quiet
	ls.m.fsm.read(func(s *State, _ uint64) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		for id := range ls.appSeen {
			if a, ok := s.Apps[id]; !ok || !a.Running() {
				delete(ls.appSeen, id)
				delete(ls.localizing, id)
			}
		}
		for _, a := range s.Apps {
			if !a.Running() {
				continue
			}
			seen, ok := ls.appSeen[a.ID]
			if !ok {
				ls.appSeen[a.ID] = now
				continue
			}
			if d := now.Sub(seen); d > ls.m.cfg.AppTimeout {
				gone = append(gone, quiet{a.ID, a.DriverHost, d})
			}
		}
	})
	for _, a := range gone {
		msg := fmt.Sprintf("driver of %s (host %s) stopped heartbeating: nothing heard for %s", a.id, a.host, a.d.Round(time.Second))
		if _, err := ls.m.apply(cmdEndApp, endAppCmd{App: a.id, State: pb.AppState_APP_STATE_ABANDONED,
			Final: pb.FinalStatus_FINAL_STATUS_FAILED, Message: msg, Retain: ls.m.cfg.RetainedApps, TimeMS: nowMS()}); err != nil {
			ls.logger.Warn("end abandoned application", "app", a.id, "err", err)
			continue
		}
		ls.logger.Warn("application abandoned", "app", a.id, "driver_host", a.host)
	}
}

// abandonPlacements gives up on executors placed long ago whose launch no
// request of this term is driving (their leader died mid-launch and the
// driver did not retry).
func (ls *leaderState) abandonPlacements() {
	limit := 2 * ls.m.cfg.LaunchTimeout
	now := time.Now()
	var ups []update
	ls.m.fsm.read(func(s *State, _ uint64) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		for _, e := range s.Executors {
			if e.State != pb.ExecutorState_EXECUTOR_STATE_PLACED || ls.launching[e.RequestID] > 0 {
				continue
			}
			if now.Sub(time.UnixMilli(e.PlacedMS)) > limit {
				ups = append(ups, update{App: e.App, ID: e.ID, State: pb.ExecutorState_EXECUTOR_STATE_LOST,
					Message: fmt.Sprintf("launch on worker %s did not complete within %s", e.Worker, limit)})
			}
		}
	})
	if len(ups) > 0 {
		if _, err := ls.m.apply(cmdUpdate, updateCmd{Updates: ups, TimeMS: nowMS()}); err != nil {
			ls.logger.Warn("abandon placements", "err", err)
		}
	}
}

// killNotice is how long after spindle kill the executors are stopped,
// so the driver learns of the kill before it sees its processes die.
const killNotice = 500 * time.Millisecond

// stopJob is one StopExecutors call to make.
type stopJob struct {
	worker, addr, app string
	ids               []string
	reason            string
	appEnded          bool
}

func (j stopJob) key() string {
	k := j.worker + "/" + j.app
	if j.appEnded {
		k += "/ended"
	}
	return k
}

// reconcile stops executors marked for stopping, and tells workers about
// applications that ended, one call per worker and application at a time.
func (ls *leaderState) reconcile() {
	var jobs []stopJob
	ls.m.fsm.read(func(s *State, _ uint64) {
		ls.mu.Lock()
		defer ls.mu.Unlock()
		groups := map[string]*stopJob{}
		hosted := map[string]map[string]bool{} // app -> workers that ran it
		busy := map[string]bool{}              // worker/app pairs with active executors
		now := nowMS()
		for _, e := range s.Executors {
			if hosted[e.App] == nil {
				hosted[e.App] = map[string]bool{}
			}
			hosted[e.App][e.Worker] = true
			if e.Active() {
				busy[e.Worker+"/"+e.App] = true
			}
			if !e.Active() || !e.StopRequested {
				continue
			}
			// A killed application's driver gets a moment to hear why
			// before its executors die.
			if a := s.Apps[e.App]; a != nil && a.State == pb.AppState_APP_STATE_KILLED && now-a.EndedMS < killNotice.Milliseconds() {
				continue
			}
			w, ok := s.Workers[e.Worker]
			if !ok || !w.Alive {
				continue
			}
			j := stopJob{worker: w.ID, addr: w.Addr, app: e.App, reason: e.StopReason}
			if g, ok := groups[j.key()]; ok {
				g.ids = append(g.ids, e.ID)
				continue
			}
			j.ids = []string{e.ID}
			groups[j.key()] = &j
		}
		for _, a := range s.Apps {
			if a.Running() {
				continue
			}
			for wid := range hosted[a.ID] {
				w, ok := s.Workers[wid]
				if !ok || !w.Alive || ls.notified[a.ID+"/"+wid] {
					continue
				}
				if busy[wid+"/"+a.ID] {
					continue // tell it once its executors are stopped
				}
				j := stopJob{worker: wid, addr: w.Addr, app: a.ID, reason: a.Message, appEnded: true}
				groups[j.key()] = &j
			}
		}
		for k, j := range groups {
			if ls.stopping[k] {
				continue
			}
			ls.stopping[k] = true
			jobs = append(jobs, *j)
		}
	})
	sort.Slice(jobs, func(i, j int) bool { return jobs[i].key() < jobs[j].key() })
	for _, j := range jobs {
		ls.goOwned(func() { ls.stopOnWorker(j) })
	}
}

// stopOnWorker makes one StopExecutors call and records the outcome.
func (ls *leaderState) stopOnWorker(j stopJob) {
	defer func() {
		ls.mu.Lock()
		delete(ls.stopping, j.key())
		ls.mu.Unlock()
	}()
	wc, err := ls.m.workerClient(j.addr)
	if err != nil {
		ls.logger.Warn("stop executors", "worker", j.worker, "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(ls.ctx, ls.m.cfg.StopGrace+10*time.Second)
	defer cancel()
	resp, err := wc.StopExecutors(ctx, &pb.StopExecutorsRequest{
		WorkerId: j.worker, AppId: j.app, ExecutorIds: j.ids,
		GraceMs: ls.m.cfg.StopGrace.Milliseconds(), Reason: j.reason, AppEnded: j.appEnded,
	})
	if err != nil {
		if ls.ctx.Err() == nil {
			ls.logger.Warn("stop executors", "worker", j.worker, "app", j.app, "err", err)
			// Try again at the next tick, not in a tight loop.
			select {
			case <-ls.ctx.Done():
			case <-time.After(ls.tick()):
			}
		}
		return
	}
	if j.appEnded {
		ls.mu.Lock()
		ls.notified[j.app+"/"+j.worker] = true
		ls.mu.Unlock()
	}
	ups := make([]update, 0, len(resp.GetExecutors()))
	for _, we := range resp.GetExecutors() {
		st := pb.ExecutorState_EXECUTOR_STATE_EXITED
		if we.GetRunning() {
			continue
		}
		ups = append(ups, update{App: we.GetAppId(), ID: we.GetExecutorId(), State: st,
			ExitCode: int(we.GetExitCode()), Message: we.GetMessage()})
	}
	// Executors the worker does not know are gone: record them too, or
	// they would be asked for again forever.
	known := map[string]bool{}
	for _, we := range resp.GetExecutors() {
		known[we.GetExecutorId()] = true
	}
	for _, id := range j.ids {
		if !known[id] {
			ups = append(ups, update{App: j.app, ID: id, State: pb.ExecutorState_EXECUTOR_STATE_EXITED, ExitCode: -1,
				Message: fmt.Sprintf("worker %s does not run it: %s", j.worker, j.reason)})
		}
	}
	if len(ups) > 0 {
		if _, err := ls.m.apply(cmdUpdate, updateCmd{Updates: ups, TimeMS: nowMS()}); err != nil {
			ls.logger.Warn("record stopped executors", "worker", j.worker, "err", err)
		}
	}
}

// stopUnknown stops executors a worker runs that the state does not want:
// they belong to an ended application, were declared lost, or are unknown.
func (ls *leaderState) stopUnknown(worker, addr string, reports []*pb.WorkerExecutor) {
	byApp := map[string][]string{}
	ls.m.fsm.read(func(s *State, _ uint64) {
		for _, r := range reports {
			if !r.GetRunning() {
				continue
			}
			e, ok := s.Executors[execKey(r.GetAppId(), r.GetExecutorId())]
			if ok && e.Worker == worker && e.Active() && !e.StopRequested {
				continue
			}
			if ok && e.Active() && e.StopRequested {
				continue // reconcile handles it
			}
			byApp[r.GetAppId()] = append(byApp[r.GetAppId()], r.GetExecutorId())
		}
	})
	for app, ids := range byApp {
		j := stopJob{worker: worker, addr: addr, app: app, ids: ids, reason: "the masters no longer expect this executor to run"}
		ls.mu.Lock()
		busy := ls.stopping[j.key()]
		if !busy {
			ls.stopping[j.key()] = true
		}
		ls.mu.Unlock()
		if !busy {
			ls.logger.Info("stopping executors the state does not expect", "worker", worker, "app", app, "executors", ids)
			ls.goOwned(func() { ls.stopOnWorker(j) })
		}
	}
}
