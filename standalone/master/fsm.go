package master

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/hashicorp/raft"
)

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
	case cmdAppInput:
		var c appInputCmd
		if err := decode(&c); err != nil {
			return nil, err
		}
		return nil, s.appInput(c)
	}
	// An unknown command comes from a newer master; ignoring it keeps this
	// replica going, and the log entry is still there after an upgrade.
	return nil, fmt.Errorf("unknown command type %d", uint8(t))
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
