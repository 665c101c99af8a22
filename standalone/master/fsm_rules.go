package master

import (
	"fmt"
	"sort"
	"time"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

func (s *State) registerWorker(c registerWorkerCmd) error {
	w := c.Worker
	if w.ID == "" {
		return fmt.Errorf("%w: worker without id", apierr.ErrBadRequest)
	}
	old, existed := s.Workers[w.ID]
	w.Alive = true
	w.Message = ""
	w.RegisteredMS = c.TimeMS
	s.Workers[w.ID] = &w
	if existed && old.Incarnation != w.Incarnation {
		// A new worker process knows nothing of its predecessor's
		// executors: those it does not report are gone.
		reported := map[string]bool{}
		for _, r := range c.Reports {
			reported[execKey(r.App, r.ID)] = true
		}
		for _, e := range s.Executors {
			if e.Worker == w.ID && e.Active() && !reported[e.Key()] {
				e.State = pb.ExecutorState_EXECUTOR_STATE_LOST
				e.Message = fmt.Sprintf("worker %s (host %s) restarted; the executor is gone", w.ID, w.Host)
				e.UpdatedMS = c.TimeMS
			}
		}
	}
	return s.applyReports(w.ID, c.Reports, c.TimeMS)
}

func (s *State) workerLost(c workerLostCmd) error {
	w, ok := s.Workers[c.ID]
	if !ok {
		return fmt.Errorf("%w: %s", apierr.ErrUnknownWorker, c.ID)
	}
	w.Alive = false
	w.Message = c.Message
	for _, e := range s.Executors {
		if e.Worker == c.ID && e.Active() {
			e.State = pb.ExecutorState_EXECUTOR_STATE_LOST
			e.Message = c.Message
			e.UpdatedMS = c.TimeMS
		}
	}
	return nil
}

// applyReports moves executors forward to what their worker reports:
// placed ones it runs become running, active ones it no longer runs exited.
func (s *State) applyReports(worker string, reports []report, now int64) error {
	if _, ok := s.Workers[worker]; !ok {
		return fmt.Errorf("%w: %s", apierr.ErrUnknownWorker, worker)
	}
	for _, r := range reports {
		e, ok := s.Executors[execKey(r.App, r.ID)]
		if !ok || e.Worker != worker || !e.Active() {
			continue
		}
		switch {
		case r.Running && e.State == pb.ExecutorState_EXECUTOR_STATE_PLACED:
			e.State = pb.ExecutorState_EXECUTOR_STATE_RUNNING
			e.UpdatedMS = now
		case !r.Running:
			e.State = pb.ExecutorState_EXECUTOR_STATE_EXITED
			e.ExitCode = r.ExitCode
			e.Message = r.Message
			e.UpdatedMS = now
		}
	}
	return nil
}

func (s *State) registerApp(c registerAppCmd) string {
	if c.RequestID != "" {
		for _, a := range s.Apps {
			if a.RequestID == c.RequestID {
				return a.ID
			}
		}
	}
	s.AppSeq++
	id := fmt.Sprintf("app-%s-%04d", time.UnixMilli(c.TimeMS).UTC().Format("20060102150405"), s.AppSeq)
	s.Apps[id] = &App{
		ID: id, Name: c.Name, DriverHost: c.DriverHost, RequestID: c.RequestID,
		State: pb.AppState_APP_STATE_RUNNING, SubmittedMS: c.TimeMS,
	}
	return id
}

func (s *State) endApp(c endAppCmd) error {
	a, ok := s.Apps[c.App]
	if !ok {
		return fmt.Errorf("%w: %s", apierr.ErrUnknownApp, c.App)
	}
	if !a.Running() {
		return nil
	}
	a.State = c.State
	a.Final = c.Final
	a.Message = c.Message
	a.EndedMS = c.TimeMS
	for _, e := range s.Executors {
		if e.App == a.ID && e.Active() && !e.StopRequested {
			e.StopRequested = true
			e.StopReason = c.Message
		}
	}
	s.forgetOldApps(c.Retain)
	return nil
}

// forgetOldApps drops the oldest ended applications, and their executors,
// beyond the newest retain ones. Applications with executors still active
// are kept until those are stopped.
func (s *State) forgetOldApps(retain int) {
	if retain <= 0 {
		return
	}
	active := map[string]bool{}
	for _, e := range s.Executors {
		if e.Active() {
			active[e.App] = true
		}
	}
	var ended []*App
	for _, a := range s.Apps {
		if !a.Running() {
			ended = append(ended, a)
		}
	}
	if len(ended) <= retain {
		return
	}
	sort.Slice(ended, func(i, j int) bool {
		if ended[i].EndedMS != ended[j].EndedMS {
			return ended[i].EndedMS < ended[j].EndedMS
		}
		return ended[i].ID < ended[j].ID
	})
	for _, a := range ended[:len(ended)-retain] {
		if active[a.ID] {
			continue
		}
		delete(s.Apps, a.ID)
		for k, e := range s.Executors {
			if e.App == a.ID {
				delete(s.Executors, k)
			}
		}
	}
}

func (s *State) place(c placeCmd) error {
	a, ok := s.Apps[c.App]
	if !ok {
		return fmt.Errorf("%w: %s", apierr.ErrUnknownApp, c.App)
	}
	if !a.Running() {
		return fmt.Errorf("%w: %s is %s", apierr.ErrAppEnded, a.ID, appStateName(a.State))
	}
	// A retried proposal of a gang already placed is a no-op.
	same := 0
	for _, e := range c.Executors {
		if old, ok := s.Executors[execKey(c.App, e.ID)]; ok {
			if old.RequestID == c.RequestID && c.RequestID != "" {
				same++
				continue
			}
			if old.Active() {
				return fmt.Errorf("%w: executor %s of %s already exists", apierr.ErrBadRequest, e.ID, c.App)
			}
		}
	}
	if same == len(c.Executors) && same > 0 {
		return nil
	}
	if same > 0 {
		return fmt.Errorf("%w: request %s was placed in part", apierr.ErrBadRequest, c.RequestID)
	}
	// Check the whole gang fits before changing anything.
	use := s.usageByWorker()
	for _, e := range c.Executors {
		w, ok := s.Workers[e.Worker]
		if !ok || !w.Alive {
			return fmt.Errorf("%w: worker %s is not alive", apierr.ErrNoRoom, e.Worker)
		}
		u := use[e.Worker]
		u.cores += e.Cores
		u.memoryMB += e.MemoryMB
		for _, g := range e.GPUs {
			if g < 0 || g >= w.GPUs || u.gpus[g] {
				return fmt.Errorf("%w: GPU %d of worker %s is not free", apierr.ErrNoRoom, g, e.Worker)
			}
			u.gpus[g] = true
		}
		if u.cores > w.Cores || u.memoryMB > w.MemoryMB {
			return fmt.Errorf("%w: worker %s has no room for executor %s", apierr.ErrNoRoom, e.Worker, e.ID)
		}
	}
	for _, e := range c.Executors {
		ne := *e
		ne.App = c.App
		ne.RequestID = c.RequestID
		ne.State = pb.ExecutorState_EXECUTOR_STATE_PLACED
		ne.ExitCode, ne.Message = 0, ""
		ne.StopRequested, ne.StopReason = false, ""
		ne.PlacedMS, ne.UpdatedMS = c.TimeMS, c.TimeMS
		ne.GPUs = append([]int(nil), e.GPUs...)
		s.Executors[ne.Key()] = &ne
	}
	return nil
}

func (s *State) update(us []update, now int64) {
	for _, u := range us {
		e, ok := s.Executors[execKey(u.App, u.ID)]
		if !ok || !e.Active() {
			continue // terminal states are final
		}
		if u.State == e.State || u.State == pb.ExecutorState_EXECUTOR_STATE_PLACED {
			continue
		}
		e.State = u.State
		e.ExitCode = u.ExitCode
		e.Message = u.Message
		e.UpdatedMS = now
	}
}

func (s *State) stopRequest(c stopRequestCmd) error {
	if _, ok := s.Apps[c.App]; !ok {
		return fmt.Errorf("%w: %s", apierr.ErrUnknownApp, c.App)
	}
	want := map[string]bool{}
	for _, id := range c.IDs {
		want[id] = true
	}
	for _, e := range s.Executors {
		if e.App != c.App || !e.Active() || e.StopRequested {
			continue
		}
		if len(want) == 0 || want[e.ID] {
			e.StopRequested = true
			e.StopReason = c.Reason
		}
	}
	return nil
}

func (s *State) appInput(c appInputCmd) error {
	a, ok := s.Apps[c.App]
	if !ok {
		return fmt.Errorf("%w: %s", apierr.ErrUnknownApp, c.App)
	}
	a.Input = c.Input
	return nil
}

func appStateName(s pb.AppState) string {
	switch s {
	case pb.AppState_APP_STATE_RUNNING:
		return "running"
	case pb.AppState_APP_STATE_FINISHED:
		return "finished"
	case pb.AppState_APP_STATE_KILLED:
		return "killed"
	case pb.AppState_APP_STATE_ABANDONED:
		return "abandoned"
	}
	return "unknown"
}

func executorStateName(s pb.ExecutorState) string {
	switch s {
	case pb.ExecutorState_EXECUTOR_STATE_PLACED:
		return "placed"
	case pb.ExecutorState_EXECUTOR_STATE_RUNNING:
		return "running"
	case pb.ExecutorState_EXECUTOR_STATE_EXITED:
		return "exited"
	case pb.ExecutorState_EXECUTOR_STATE_LOST:
		return "lost"
	}
	return "unknown"
}
