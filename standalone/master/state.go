package master

import (
	"sort"

	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// Worker is a registered worker as the replicated state records it.
type Worker struct {
	ID       string `json:"id"`
	Addr     string `json:"addr"`
	Host     string `json:"host"`
	Cores    int    `json:"cores"`
	MemoryMB int64  `json:"memory_mb"`
	GPUs     int    `json:"gpus"`
	// Incarnation changes every time the worker process starts.
	Incarnation  string `json:"incarnation"`
	Alive        bool   `json:"alive"`
	Message      string `json:"message,omitempty"`
	RegisteredMS int64  `json:"registered_ms"`
}

// App is an application: one driver's job.
type App struct {
	ID         string `json:"id"`
	Name       string `json:"name"`
	DriverHost string `json:"driver_host,omitempty"`
	// Input is where the application takes pushed input (AppInfo.input).
	Input       string         `json:"input,omitempty"`
	RequestID   string         `json:"request_id,omitempty"`
	State       pb.AppState    `json:"state"`
	Final       pb.FinalStatus `json:"final,omitempty"`
	Message     string         `json:"message,omitempty"`
	SubmittedMS int64          `json:"submitted_ms"`
	EndedMS     int64          `json:"ended_ms,omitempty"`
}

// Running says whether the application has not ended.
func (a *App) Running() bool { return a.State == pb.AppState_APP_STATE_RUNNING }

// Executor is one placed executor. Its arguments and environment are not
// part of the replicated state: the environment holds the job's secret.
type Executor struct {
	App       string           `json:"app"`
	ID        string           `json:"id"`
	Worker    string           `json:"worker"`
	RequestID string           `json:"request_id,omitempty"`
	Role      string           `json:"role,omitempty"` // worker, chief or ps; empty in states from before roles
	Cores     int              `json:"cores"`
	MemoryMB  int64            `json:"memory_mb"`
	GPUs      []int            `json:"gpus,omitempty"`
	State     pb.ExecutorState `json:"state"`
	ExitCode  int              `json:"exit_code,omitempty"`
	Message   string           `json:"message,omitempty"`
	// StopRequested marks an executor the leader must stop on its worker.
	StopRequested bool   `json:"stop_requested,omitempty"`
	StopReason    string `json:"stop_reason,omitempty"`
	PlacedMS      int64  `json:"placed_ms"`
	UpdatedMS     int64  `json:"updated_ms"`
}

// Active says whether the executor holds resources: placed or running.
func (e *Executor) Active() bool {
	return e.State == pb.ExecutorState_EXECUTOR_STATE_PLACED || e.State == pb.ExecutorState_EXECUTOR_STATE_RUNNING
}

// Key returns the executor's key in State.Executors.
func (e *Executor) Key() string { return execKey(e.App, e.ID) }

func execKey(app, id string) string { return app + "/" + id }

// State is the cluster state the masters replicate.
type State struct {
	Workers   map[string]*Worker   `json:"workers"`
	Apps      map[string]*App      `json:"apps"`
	Executors map[string]*Executor `json:"executors"` // by app/id
	// AppSeq numbers applications.
	AppSeq uint64 `json:"app_seq"`
}

func newState() *State {
	return &State{Workers: map[string]*Worker{}, Apps: map[string]*App{}, Executors: map[string]*Executor{}}
}

// sortedWorkers returns the workers ordered by id.
func (s *State) sortedWorkers() []*Worker {
	out := make([]*Worker, 0, len(s.Workers))
	for _, w := range s.Workers {
		out = append(out, w)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// appExecutors returns an application's executors ordered by id.
func (s *State) appExecutors(app string) []*Executor {
	var out []*Executor
	for _, e := range s.Executors {
		if e.App == app {
			out = append(out, e)
		}
	}
	sortExecutors(out)
	return out
}

func sortExecutors(es []*Executor) {
	sort.Slice(es, func(i, j int) bool {
		if es[i].App != es[j].App {
			return es[i].App < es[j].App
		}
		return naturalLess(es[i].ID, es[j].ID)
	})
}

// naturalLess orders "exec-2" before "exec-10".
func naturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := digits(a), digits(b)
		if da > 0 && db > 0 {
			na, nb := trimZeros(a[:da]), trimZeros(b[:db])
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			if na != nb {
				return na < nb
			}
			a, b = a[da:], b[db:]
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func digits(s string) int {
	n := 0
	for n < len(s) && s[n] >= '0' && s[n] <= '9' {
		n++
	}
	return n
}

func trimZeros(s string) string {
	for len(s) > 1 && s[0] == '0' {
		s = s[1:]
	}
	return s
}

// usage is what a worker's active executors hold.
type usage struct {
	cores     int
	memoryMB  int64
	gpus      map[int]bool
	executors int
}

// usageByWorker sums the resources active executors hold on each worker.
func (s *State) usageByWorker() map[string]*usage {
	u := make(map[string]*usage, len(s.Workers))
	for id := range s.Workers {
		u[id] = &usage{gpus: map[int]bool{}}
	}
	for _, e := range s.Executors {
		if !e.Active() {
			continue
		}
		wu, ok := u[e.Worker]
		if !ok {
			continue
		}
		wu.cores += e.Cores
		wu.memoryMB += e.MemoryMB
		wu.executors++
		for _, g := range e.GPUs {
			wu.gpus[g] = true
		}
	}
	return u
}

// workerInfo converts a worker and its usage for the API.
func workerInfo(w *Worker, u *usage) *pb.WorkerInfo {
	wi := &pb.WorkerInfo{
		Id: w.ID, Addr: w.Addr, Host: w.Host,
		Cores: int32(w.Cores), MemoryMb: w.MemoryMB, Gpus: int32(w.GPUs),
		Alive: w.Alive, RegisteredUnixMs: w.RegisteredMS, Message: w.Message,
	}
	if u != nil {
		wi.UsedCores, wi.UsedMemoryMb = int32(u.cores), u.memoryMB
		wi.UsedGpus, wi.Executors = int32(len(u.gpus)), int32(u.executors)
	}
	return wi
}

// executorInfo converts an executor for the API.
func (s *State) executorInfo(e *Executor) *pb.ExecutorInfo {
	ei := &pb.ExecutorInfo{
		AppId: e.App, Id: e.ID, WorkerId: e.Worker, Role: e.Role,
		Cores: int32(e.Cores), MemoryMb: e.MemoryMB,
		State: e.State, ExitCode: int32(e.ExitCode), Message: e.Message, UpdatedUnixMs: e.UpdatedMS,
	}
	if w, ok := s.Workers[e.Worker]; ok {
		ei.Host, ei.WorkerAddr = w.Host, w.Addr
	}
	for _, g := range e.GPUs {
		ei.Gpus = append(ei.Gpus, int32(g))
	}
	return ei
}

// appInfo converts an application for the API.
func appInfo(a *App) *pb.AppInfo {
	return &pb.AppInfo{
		Id: a.ID, Name: a.Name, State: a.State, FinalStatus: a.Final, Message: a.Message,
		DriverHost: a.DriverHost, SubmittedUnixMs: a.SubmittedMS, EndedUnixMs: a.EndedMS, Input: a.Input,
	}
}
