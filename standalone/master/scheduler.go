package master

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// queuedRequest is one RequestExecutors call waiting for the scheduler to
// place its executors all together (a gang).
type queuedRequest struct {
	app, requestID string
	asks           []ask
	// state moves pending -> placing -> placed, or pending -> cancelled.
	state  requestState
	placed []*Executor
	err    error
	done   chan struct{} // closed when placed or failed
}

type requestState int

const (
	requestPending requestState = iota
	requestPlacing
	requestPlaced
	requestCancelled
)

// scheduler places queued gangs first come, first served. A gang that
// does not fit holds up the gangs behind it, so big gangs are not starved
// by a stream of small ones, unless it could not fit even on an empty
// cluster (it then waits for workers without blocking anyone).
type scheduler struct {
	ls    *leaderState
	mu    sync.Mutex
	queue []*queuedRequest
	kick  chan struct{}
}

func newScheduler(ls *leaderState) *scheduler {
	return &scheduler{ls: ls, kick: make(chan struct{}, 1)}
}

func (s *scheduler) poke() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// queued returns how many gangs wait.
func (s *scheduler) queued() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// enqueue adds g at the tail.
func (s *scheduler) enqueue(g *queuedRequest) {
	s.mu.Lock()
	s.queue = append(s.queue, g)
	s.mu.Unlock()
	s.poke()
}

// cancel takes g out of the queue unless it is being placed; it reports
// whether g was cancelled (false: it was or is being placed, wait for done).
func (s *scheduler) cancel(g *queuedRequest) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if g.state != requestPending {
		return false
	}
	g.state = requestCancelled
	s.removeLocked(g)
	return true
}

func (s *scheduler) removeLocked(g *queuedRequest) {
	for i, q := range s.queue {
		if q == g {
			s.queue = append(s.queue[:i], s.queue[i+1:]...)
			return
		}
	}
}

// run places gangs whenever the state changes, until the term ends; then
// it fails whatever is still queued so the callers retry on the new leader.
func (s *scheduler) run(ctx context.Context) {
	defer func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, g := range s.queue {
			g.state = requestCancelled
			g.err = fmt.Errorf("%w: leadership lost while the request was queued", apierr.ErrNotLeader)
			close(g.done)
		}
		s.queue = nil
	}()
	for {
		changed := s.ls.m.fsm.watch()
		s.pass()
		select {
		case <-ctx.Done():
			return
		case <-changed:
		case <-s.kick:
		}
	}
}

// pass places as many gangs as fit, in order.
func (s *scheduler) pass() {
	m := s.ls.m
	for {
		s.mu.Lock()
		queue := append([]*queuedRequest(nil), s.queue...)
		s.mu.Unlock()
		progressed := false
		for _, g := range queue {
			var plan []*Executor
			var err error
			blocks := false
			m.fsm.read(func(st *State, _ uint64) {
				a, ok := st.Apps[g.app]
				switch {
				case !ok:
					err = fmt.Errorf("%w: %s", apierr.ErrUnknownApp, g.app)
				case !a.Running():
					err = fmt.Errorf("%w: %s is %s", apierr.ErrAppEnded, g.app, appStateName(a.State))
				default:
					plan, err = place(st, g.app, g.asks, m.cfg.Placement)
					if err != nil {
						blocks = fitsEmpty(st, g.asks)
					}
				}
			})
			if err != nil && errors.Is(err, apierr.ErrNoRoom) {
				if blocks {
					break
				}
				continue
			}
			s.mu.Lock()
			if g.state != requestPending {
				s.mu.Unlock()
				continue
			}
			g.state = requestPlacing
			s.mu.Unlock()
			if err == nil {
				_, err = m.apply(cmdPlace, placeCmd{App: g.app, RequestID: g.requestID, Executors: plan, TimeMS: nowMS()})
			}
			s.mu.Lock()
			if err != nil && errors.Is(err, apierr.ErrNoRoom) {
				// The state moved between planning and committing: plan again.
				g.state = requestPending
				s.mu.Unlock()
				progressed = true
				break
			}
			g.state, g.placed, g.err = requestPlaced, plan, err
			s.removeLocked(g)
			close(g.done)
			s.mu.Unlock()
			progressed = true
			break
		}
		if !progressed {
			return
		}
	}
}

// requestExecutors serves RequestExecutors on the leader.
func (ls *leaderState) requestExecutors(ctx context.Context, req *pb.RequestExecutorsRequest) (*pb.RequestExecutorsResponse, error) {
	m := ls.m
	asks, err := validateGang(req)
	if err != nil {
		return nil, err
	}
	ls.sawApp(req.GetAppId())
	if in := req.GetInput(); in != "" {
		var known string
		m.fsm.read(func(st *State, _ uint64) {
			if a, ok := st.Apps[req.GetAppId()]; ok {
				known = a.Input
			}
		})
		if known != in {
			if _, err := m.apply(cmdAppInput, appInputCmd{App: req.GetAppId(), Input: in}); err != nil {
				return nil, err
			}
		}
	}
	specs := map[string]*pb.ExecutorRequest{}
	for _, e := range req.GetExecutors() {
		specs[e.GetId()] = e
	}
	ls.mu.Lock()
	ls.launching[req.GetRequestId()]++
	ls.mu.Unlock()
	defer func() {
		ls.mu.Lock()
		if ls.launching[req.GetRequestId()]--; ls.launching[req.GetRequestId()] <= 0 {
			delete(ls.launching, req.GetRequestId())
		}
		ls.mu.Unlock()
	}()

	// A retry of a request already placed (by this leader or an earlier
	// one) resumes from the state instead of placing again.
	var placed []*Executor
	m.fsm.read(func(st *State, _ uint64) {
		for _, e := range st.appExecutors(req.GetAppId()) {
			if e.RequestID == req.GetRequestId() {
				c := *e
				placed = append(placed, &c)
			}
		}
		if len(placed) == 0 {
			a, ok := st.Apps[req.GetAppId()]
			switch {
			case !ok:
				err = fmt.Errorf("%w: %s", apierr.ErrUnknownApp, req.GetAppId())
			case !a.Running():
				err = fmt.Errorf("%w: %s is %s", apierr.ErrAppEnded, a.ID, appStateName(a.State))
			default:
				err = checkCaps(st, req.GetAppId(), asks, m.cfg.MaxExecutorsPerApp, m.cfg.MaxCoresPerApp)
				if why := neverFits(st, asks); err == nil && why != "" {
					err = fmt.Errorf("%w: %s", apierr.ErrNeverFits, why)
				}
			}
		}
	})
	if err != nil {
		return nil, err
	}
	if len(placed) > 0 && len(placed) != len(asks) {
		return nil, fmt.Errorf("%w: request %s placed %d executors, not %d", apierr.ErrBadRequest, req.GetRequestId(), len(placed), len(asks))
	}
	if len(placed) == 0 {
		timeout := m.cfg.GangTimeout
		if t := time.Duration(req.GetTimeoutMs()) * time.Millisecond; t > 0 {
			timeout = t
		}
		if placed, err = ls.waitForRoom(ctx, req.GetAppId(), req.GetRequestId(), asks, timeout); err != nil {
			return nil, err
		}
		ls.logger.Info("placed gang", "app", req.GetAppId(), "executors", len(placed), "request", req.GetRequestId())
	}
	if err := ls.launch(ctx, req.GetAppId(), placed, specs); err != nil {
		return nil, err
	}
	resp := &pb.RequestExecutorsResponse{}
	m.fsm.read(func(st *State, _ uint64) {
		for _, p := range placed {
			if e, ok := st.Executors[p.Key()]; ok {
				resp.Executors = append(resp.Executors, st.executorInfo(e))
			}
		}
	})
	return resp, nil
}

func validateGang(req *pb.RequestExecutorsRequest) ([]ask, error) {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", apierr.ErrBadRequest, fmt.Sprintf(format, a...))
	}
	if req.GetAppId() == "" || req.GetRequestId() == "" {
		return nil, bad("request without application or request id")
	}
	if len(req.GetExecutors()) == 0 {
		return nil, bad("request for no executors")
	}
	seen := map[string]bool{}
	asks := make([]ask, 0, len(req.GetExecutors()))
	for _, e := range req.GetExecutors() {
		switch {
		case e.GetId() == "":
			return nil, bad("executor without id")
		case seen[e.GetId()]:
			return nil, bad("executor id %s given twice", e.GetId())
		case e.GetCores() < 1:
			return nil, bad("executor %s asks for %d cores; at least 1", e.GetId(), e.GetCores())
		case e.GetMemoryMb() < 1:
			return nil, bad("executor %s asks for %d MiB; at least 1", e.GetId(), e.GetMemoryMb())
		case e.GetGpus() < 0:
			return nil, bad("executor %s asks for %d GPUs", e.GetId(), e.GetGpus())
		case len(e.GetArgs()) == 0:
			return nil, bad("executor %s has no arguments", e.GetId())
		case !validRole(e.GetRole()):
			return nil, bad("executor %s has role %q; want lower-case letters, at most 32", e.GetId(), e.GetRole())
		}
		seen[e.GetId()] = true
		asks = append(asks, ask{ID: e.GetId(), Role: e.GetRole(), Cores: int(e.GetCores()), MemoryMB: e.GetMemoryMb(),
			GPUs: int(e.GetGpus()), Preferred: e.GetPreferredHosts(), Excluded: e.GetExcludedHosts()})
	}
	return asks, nil
}

// waitForRoom queues the gang and waits until the scheduler placed it, the
// timeout passed (ErrNoRoom saying what was missing), ctx ended or the term
// ended (ErrNotLeader: the caller retries on the new leader).
func (ls *leaderState) waitForRoom(ctx context.Context, app, requestID string, asks []ask, timeout time.Duration) ([]*Executor, error) {
	g := &queuedRequest{app: app, requestID: requestID, asks: asks, done: make(chan struct{})}
	ls.sched.enqueue(g)
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	var cause error
	select {
	case <-g.done:
		return g.placed, g.err
	case <-timer.C:
	case <-ctx.Done():
		cause = ctx.Err()
	case <-ls.ctx.Done():
		cause = fmt.Errorf("%w: leadership lost while the request was queued", apierr.ErrNotLeader)
	case <-ls.m.stopping:
		cause = fmt.Errorf("%w: master shutting down", apierr.ErrStopped)
	}
	if !ls.sched.cancel(g) {
		<-g.done // being placed right now: take the result
		return g.placed, g.err
	}
	if cause != nil {
		return nil, cause
	}
	var why string
	ls.m.fsm.read(func(st *State, _ uint64) { why = explainNoRoom(st, app, asks) })
	return nil, fmt.Errorf("%w: gang of %d executor%s not placed within %s: %s",
		apierr.ErrNoRoom, len(asks), plural(len(asks)), timeout, why)
}

// launch starts every placed executor on its worker; when any launch
// fails it stops the others, so nothing of the gang is left running.
func (ls *leaderState) launch(ctx context.Context, app string, placed []*Executor, specs map[string]*pb.ExecutorRequest) error {
	m := ls.m
	type target struct {
		e    *Executor
		addr string
		host string
	}
	var targets []target
	var err error
	m.fsm.read(func(st *State, _ uint64) {
		for _, p := range placed {
			e, ok := st.Executors[p.Key()]
			if !ok {
				err = fmt.Errorf("%w: executor %s vanished from the state", apierr.ErrLaunch, p.ID)
				return
			}
			if e.State != pb.ExecutorState_EXECUTOR_STATE_PLACED {
				if launchedBefore(e) {
					continue
				}
				if !e.Active() {
					err = fmt.Errorf("%w: executor %s of %s %s before the gang started: %s",
						apierr.ErrLaunch, e.ID, app, executorStateName(e.State), e.Message)
					return
				}
				continue
			}
			w := st.Workers[e.Worker]
			if w == nil {
				err = fmt.Errorf("%w: worker %s of executor %s is unknown", apierr.ErrLaunch, e.Worker, e.ID)
				return
			}
			c := *e
			targets = append(targets, target{e: &c, addr: w.Addr, host: w.Host})
		}
	})
	if err != nil {
		ls.abortGang(app, placed, err.Error())
		return err
	}
	lctx, cancel := context.WithTimeout(ctx, m.cfg.LaunchTimeout)
	defer cancel()
	g, gctx := errgroup.WithContext(lctx)
	for _, t := range targets {
		spec := specs[t.e.ID]
		if err := m.checkLaunchChannel(t.addr, t.e.Worker, spec.GetEnv()); err != nil {
			ls.abortGang(app, placed, err.Error())
			return err
		}
	}
	for _, t := range targets {
		spec := specs[t.e.ID]
		g.Go(func() error {
			wc, err := m.workerClient(t.addr)
			if err != nil {
				return err
			}
			req := &pb.LaunchRequest{
				WorkerId: t.e.Worker, AppId: app, ExecutorId: t.e.ID, LaunchId: t.e.RequestID,
				Args: spec.GetArgs(), Env: spec.GetEnv(),
				Cores: int32(t.e.Cores), MemoryMb: t.e.MemoryMB,
			}
			for _, gpu := range t.e.GPUs {
				req.Gpus = append(req.Gpus, int32(gpu))
			}
			if _, err := wc.Launch(gctx, req); err != nil {
				return fmt.Errorf("%w: launch executor %s on worker %s (host %s): %v",
					apierr.ErrLaunch, t.e.ID, t.e.Worker, t.host, apierr.FromStatus(err))
			}
			return nil
		})
	}
	if err := g.Wait(); err != nil {
		ls.abortGang(app, placed, err.Error())
		return err
	}
	ups := make([]update, 0, len(targets))
	for _, t := range targets {
		ups = append(ups, update{App: app, ID: t.e.ID, State: pb.ExecutorState_EXECUTOR_STATE_RUNNING})
	}
	if len(ups) > 0 {
		if _, err := m.apply(cmdUpdate, updateCmd{Updates: ups, TimeMS: nowMS()}); err != nil {
			return fmt.Errorf("record launched executors: %w", err)
		}
	}
	return nil
}

// launchedBefore says whether an executor that is no longer placed ran
// and ended on its own: an earlier try of the same request (on this
// leader or on one that lost its term before answering) launched it, so a
// retry counts it as started and reports its exit rather than failing the
// gang. A short executor exits in milliseconds, often before the client's
// retry reaches the new leader.
func launchedBefore(e *Executor) bool {
	return e.State == pb.ExecutorState_EXECUTOR_STATE_EXITED && !e.StopRequested
}

// abortGang stops a gang's executors after a failed launch and waits,
// within the stop grace period, until they are gone: a failed request
// leaves nothing running.
func (ls *leaderState) abortGang(app string, placed []*Executor, why string) {
	ids := make([]string, 0, len(placed))
	for _, p := range placed {
		ids = append(ids, p.ID)
	}
	if _, err := ls.m.apply(cmdStopRequest, stopRequestCmd{App: app, IDs: ids,
		Reason: "gang launch failed: " + why, TimeMS: nowMS()}); err != nil {
		ls.logger.Warn("abort gang", "app", app, "err", err)
		return
	}
	ls.poke()
	ctx, cancel := context.WithTimeout(ls.ctx, ls.m.cfg.StopGrace+10*time.Second)
	defer cancel()
	if _, err := ls.waitTerminal(ctx, app, ids); err != nil {
		ls.logger.Warn("abort gang", "app", app, "err", err)
	}
}
