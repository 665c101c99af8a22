package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// cmdType tags a Raft log entry. The first byte of every entry is its type,
// the rest is the command as JSON.
type cmdType uint8

// Commands. Values are stored in Raft logs: never renumber them.
const (
	cmdRegisterWorker cmdType = 1
	cmdWorkerLost     cmdType = 2
	cmdWorkerReport   cmdType = 3
	cmdRegisterApp    cmdType = 4
	cmdEndApp         cmdType = 5
	cmdPlace          cmdType = 6
	cmdUpdate         cmdType = 7
	cmdStopRequest    cmdType = 8
)

func (t cmdType) String() string {
	switch t {
	case cmdRegisterWorker:
		return "register-worker"
	case cmdWorkerLost:
		return "worker-lost"
	case cmdWorkerReport:
		return "worker-report"
	case cmdRegisterApp:
		return "register-app"
	case cmdEndApp:
		return "end-app"
	case cmdPlace:
		return "place"
	case cmdUpdate:
		return "update"
	case cmdStopRequest:
		return "stop-request"
	}
	return fmt.Sprintf("command-%d", uint8(t))
}

// report is an executor's state as its worker reports it.
type report struct {
	App      string `json:"app"`
	ID       string `json:"id"`
	Running  bool   `json:"running"`
	ExitCode int    `json:"exit_code,omitempty"`
	Message  string `json:"message,omitempty"`
}

// registerWorkerCmd records a worker (re-)registration.
type registerWorkerCmd struct {
	Worker  Worker   `json:"worker"`
	Reports []report `json:"reports,omitempty"`
	TimeMS  int64    `json:"time_ms"`
}

// workerLostCmd declares a worker lost and its executors with it.
type workerLostCmd struct {
	ID      string `json:"id"`
	Message string `json:"message"`
	TimeMS  int64  `json:"time_ms"`
}

// workerReportCmd records the executor states a worker reported.
type workerReportCmd struct {
	ID      string   `json:"id"`
	Reports []report `json:"reports"`
	TimeMS  int64    `json:"time_ms"`
}

// registerAppCmd starts an application.
type registerAppCmd struct {
	Name       string `json:"name"`
	DriverHost string `json:"driver_host,omitempty"`
	RequestID  string `json:"request_id,omitempty"`
	TimeMS     int64  `json:"time_ms"`
}

// endAppCmd ends an application; its executors are to be stopped. Retain
// is how many ended applications the state keeps.
type endAppCmd struct {
	App     string      `json:"app"`
	State   pb.AppState `json:"state"`
	Message string      `json:"message"`
	Retain  int         `json:"retain"`
	TimeMS  int64       `json:"time_ms"`
}

// placeCmd reserves resources for a whole gang at once.
type placeCmd struct {
	App       string      `json:"app"`
	RequestID string      `json:"request_id"`
	Executors []*Executor `json:"executors"`
	TimeMS    int64       `json:"time_ms"`
}

// update is a new state for one executor.
type update struct {
	App      string           `json:"app"`
	ID       string           `json:"id"`
	State    pb.ExecutorState `json:"state"`
	ExitCode int              `json:"exit_code,omitempty"`
	Message  string           `json:"message,omitempty"`
}

// updateCmd moves executors to new states.
type updateCmd struct {
	Updates []update `json:"updates"`
	TimeMS  int64    `json:"time_ms"`
}

// stopRequestCmd marks executors of an application to be stopped; no ids
// means all of them.
type stopRequestCmd struct {
	App    string   `json:"app"`
	IDs    []string `json:"ids,omitempty"`
	Reason string   `json:"reason"`
	TimeMS int64    `json:"time_ms"`
}

// encode serialises a command for the Raft log.
func encode(t cmdType, cmd any) ([]byte, error) {
	b, err := json.Marshal(cmd)
	if err != nil {
		return nil, fmt.Errorf("encode %s command: %w", t, err)
	}
	return append([]byte{byte(t)}, b...), nil
}

// fsm applies committed commands to the cluster state. Every master runs
// one; all of them reach the same state because Apply depends on nothing
// but the log (times come from the commands, never from the clock).
type fsm struct {
	mu    sync.RWMutex
	state *State
	// version counts changes (applied entries and restores).
	version uint64
	changed chan struct{} // closed and replaced after every change
}

var _ raft.FSM = (*fsm)(nil)

func newFSM() *fsm {
	return &fsm{state: newState(), changed: make(chan struct{})}
}

// read calls f with the state under the read lock; f must not keep
// references to it.
func (f *fsm) read(fn func(s *State, version uint64)) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	fn(f.state, f.version)
}

// watch returns a channel closed at the next change.
func (f *fsm) watch() <-chan struct{} {
	f.mu.RLock()
	defer f.mu.RUnlock()
	return f.changed
}

func (f *fsm) notifyLocked() {
	f.version++
	close(f.changed)
	f.changed = make(chan struct{})
}

// Apply applies one committed log entry. The returned value is the
// command's result: an error, or a value the proposer waits for.
func (f *fsm) Apply(l *raft.Log) any {
	if l.Type != raft.LogCommand || len(l.Data) == 0 {
		return nil
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	defer f.notifyLocked()
	res, err := f.applyLocked(cmdType(l.Data[0]), l.Data[1:])
	if err != nil {
		return err
	}
	return res
}

func (f *fsm) applyLocked(t cmdType, data []byte) (any, error) {
	decode := func(v any) error {
		if err := json.Unmarshal(data, v); err != nil {
			return fmt.Errorf("decode %s command: %w", t, err)
		}
		return nil
	}
	s := f.state
	switch t {
	case cmdRegisterWorker:
		var c registerWorkerCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.registerWorker(c)
	case cmdWorkerLost:
		var c workerLostCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.workerLost(c)
	case cmdWorkerReport:
		var c workerReportCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.applyReports(c.ID, c.Reports, c.TimeMS)
	case cmdRegisterApp:
		var c registerAppCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return s.registerApp(c), nil
	case cmdEndApp:
		var c endAppCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.endApp(c)
	case cmdPlace:
		var c placeCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.place(c)
	case cmdUpdate:
		var c updateCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		s.update(c.Updates, c.TimeMS)
		return nil, nil
	case cmdStopRequest:
		var c stopRequestCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.stopRequest(c)
	}
	// An unknown command comes from a newer master; ignoring it keeps this
	// replica going, and the log entry is still there after an upgrade.
	return nil, fmt.Errorf("unknown command type %d", uint8(t))
}

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

// snapshotVersion tags the snapshot layout.
const snapshotVersion = 1

type snapshotFile struct {
	Version int    `json:"version"`
	State   *State `json:"state"`
}

// Snapshot captures the state for log compaction. The state is encoded
// under the lock, so Persist can run while Apply goes on.
func (f *fsm) Snapshot() (raft.FSMSnapshot, error) {
	f.mu.RLock()
	defer f.mu.RUnlock()
	b, err := json.Marshal(snapshotFile{Version: snapshotVersion, State: f.state})
	if err != nil {
		return nil, fmt.Errorf("encode snapshot: %w", err)
	}
	return &fsmSnapshot{data: b}, nil
}

// Restore replaces the state with a snapshot's.
func (f *fsm) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var sf snapshotFile
	if err := json.NewDecoder(rc).Decode(&sf); err != nil {
		return fmt.Errorf("decode snapshot: %w", err)
	}
	if sf.Version != snapshotVersion {
		return fmt.Errorf("snapshot version %d: this master reads version %d", sf.Version, snapshotVersion)
	}
	if sf.State == nil {
		return errors.New("snapshot holds no state")
	}
	st := newState()
	for k, v := range sf.State.Workers {
		st.Workers[k] = v
	}
	for k, v := range sf.State.Apps {
		st.Apps[k] = v
	}
	for k, v := range sf.State.Executors {
		st.Executors[k] = v
	}
	st.AppSeq = sf.State.AppSeq
	f.mu.Lock()
	defer f.mu.Unlock()
	f.state = st
	f.notifyLocked()
	return nil
}

type fsmSnapshot struct{ data []byte }

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(s.data); err != nil {
		_ = sink.Cancel()
		return fmt.Errorf("write snapshot: %w", err)
	}
	return sink.Close()
}

func (s *fsmSnapshot) Release() {}
