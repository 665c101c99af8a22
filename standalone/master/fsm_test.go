package master

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// applyTo applies one command to f as Raft would.
func applyTo(t *testing.T, f *fsm, index uint64, typ cmdType, cmd any) any {
	t.Helper()
	b, err := encode(typ, cmd)
	if err != nil {
		t.Fatal(err)
	}
	return f.Apply(&raft.Log{Index: index, Type: raft.LogCommand, Data: b})
}

func mustApply(t *testing.T, f *fsm, index uint64, typ cmdType, cmd any) any {
	t.Helper()
	res := applyTo(t, f, index, typ, cmd)
	if err, ok := res.(error); ok {
		t.Fatalf("apply %s: %v", typ, err)
	}
	return res
}

func worker(id string, cores int, mem int64, gpus int) Worker {
	return Worker{ID: id, Addr: id + ":7078", Host: "host-" + id, Cores: cores, MemoryMB: mem, GPUs: gpus, Incarnation: "i1"}
}

// seeded returns an FSM with two workers and a running application.
func seeded(t *testing.T) (*fsm, string) {
	f := newFSM()
	mustApply(t, f, 1, cmdRegisterWorker, registerWorkerCmd{Worker: worker("w1", 4, 8192, 2), TimeMS: 1})
	mustApply(t, f, 2, cmdRegisterWorker, registerWorkerCmd{Worker: worker("w2", 2, 4096, 0), TimeMS: 2})
	app := mustApply(t, f, 3, cmdRegisterApp, registerAppCmd{Name: "job", RequestID: "r1", TimeMS: 3}).(string)
	return f, app
}

func execState(f *fsm, app, id string) (st pb.ExecutorState, msg string) {
	f.read(func(s *State, _ uint64) {
		if e, ok := s.Executors[execKey(app, id)]; ok {
			st, msg = e.State, e.Message
		}
	})
	return
}

func TestFSMLifecycle(t *testing.T) {
	f, app := seeded(t)
	if again := mustApply(t, f, 4, cmdRegisterApp, registerAppCmd{Name: "job", RequestID: "r1", TimeMS: 4}); again != app {
		t.Fatalf("retried registration made %v, want the same %s", again, app)
	}
	place := placeCmd{App: app, RequestID: "g1", TimeMS: 5, Executors: []*Executor{
		{ID: "exec-0", Worker: "w1", Cores: 2, MemoryMB: 2048, GPUs: []int{0}},
		{ID: "exec-1", Worker: "w2", Cores: 2, MemoryMB: 2048},
	}}
	mustApply(t, f, 5, cmdPlace, place)
	// The same proposal again (a retry) is a no-op, not a double booking.
	mustApply(t, f, 6, cmdPlace, place)
	f.read(func(s *State, _ uint64) {
		u := s.usageByWorker()
		if u["w1"].cores != 2 || u["w2"].cores != 2 || !u["w1"].gpus[0] {
			t.Fatalf("usage after placing: w1 %+v w2 %+v", u["w1"], u["w2"])
		}
	})
	// w2 is full: a gang that needs it is refused as a whole.
	res := applyTo(t, f, 7, cmdPlace, placeCmd{App: app, RequestID: "g2", TimeMS: 7, Executors: []*Executor{
		{ID: "exec-2", Worker: "w1", Cores: 1, MemoryMB: 1},
		{ID: "exec-3", Worker: "w2", Cores: 1, MemoryMB: 1},
	}})
	if err, _ := res.(error); !errors.Is(err, apierr.ErrNoRoom) {
		t.Fatalf("overbooking w2: %v, want ErrNoRoom", res)
	}
	if st, _ := execState(f, app, "exec-2"); st != pb.ExecutorState_EXECUTOR_STATE_UNSPECIFIED {
		t.Fatalf("half a refused gang was placed: exec-2 is %v", st)
	}
	// A GPU already held cannot be given twice.
	res = applyTo(t, f, 8, cmdPlace, placeCmd{App: app, RequestID: "g3", TimeMS: 8, Executors: []*Executor{
		{ID: "exec-4", Worker: "w1", Cores: 1, MemoryMB: 1, GPUs: []int{0}},
	}})
	if err, _ := res.(error); !errors.Is(err, apierr.ErrNoRoom) {
		t.Fatalf("double-booked GPU: %v", res)
	}

	mustApply(t, f, 9, cmdWorkerReport, workerReportCmd{ID: "w1", TimeMS: 9, Reports: []report{{App: app, ID: "exec-0", Running: true}}})
	if st, _ := execState(f, app, "exec-0"); st != pb.ExecutorState_EXECUTOR_STATE_RUNNING {
		t.Fatalf("exec-0 is %v after its worker reported it running", st)
	}
	mustApply(t, f, 10, cmdWorkerLost, workerLostCmd{ID: "w2", Message: "worker w2 stopped heartbeating", TimeMS: 10})
	if st, msg := execState(f, app, "exec-1"); st != pb.ExecutorState_EXECUTOR_STATE_LOST || !strings.Contains(msg, "w2") {
		t.Fatalf("exec-1 on the lost worker: %v %q", st, msg)
	}
	// Terminal states are final: a late report does not revive it.
	mustApply(t, f, 11, cmdUpdate, updateCmd{TimeMS: 11, Updates: []update{{App: app, ID: "exec-1", State: pb.ExecutorState_EXECUTOR_STATE_RUNNING}}})
	if st, _ := execState(f, app, "exec-1"); st != pb.ExecutorState_EXECUTOR_STATE_LOST {
		t.Fatalf("lost executor moved back to %v", st)
	}
	mustApply(t, f, 12, cmdEndApp, endAppCmd{App: app, State: pb.AppState_APP_STATE_KILLED, Message: "killed", Retain: 10, TimeMS: 12})
	f.read(func(s *State, _ uint64) {
		e := s.Executors[execKey(app, "exec-0")]
		if !e.StopRequested || e.StopReason != "killed" {
			t.Fatalf("running executor of a killed app: %+v", e)
		}
	})
	res = applyTo(t, f, 13, cmdPlace, placeCmd{App: app, RequestID: "g4", TimeMS: 13, Executors: []*Executor{{ID: "x", Worker: "w1", Cores: 1, MemoryMB: 1}}})
	if err, _ := res.(error); !errors.Is(err, apierr.ErrAppEnded) {
		t.Fatalf("placing for an ended app: %v", res)
	}
	// A worker restarting (new incarnation) loses what it no longer reports.
	w := worker("w1", 4, 8192, 2)
	w.Incarnation = "i2"
	mustApply(t, f, 14, cmdRegisterWorker, registerWorkerCmd{Worker: w, TimeMS: 14})
	if st, msg := execState(f, app, "exec-0"); st != pb.ExecutorState_EXECUTOR_STATE_LOST || !strings.Contains(msg, "restarted") {
		t.Fatalf("executor of a restarted worker: %v %q", st, msg)
	}
}

func TestFSMBadCommands(t *testing.T) {
	f, _ := seeded(t)
	tests := []struct {
		name string
		typ  cmdType
		cmd  any
		want error
	}{
		{"lost unknown worker", cmdWorkerLost, workerLostCmd{ID: "nope"}, apierr.ErrUnknownWorker},
		{"report unknown worker", cmdWorkerReport, workerReportCmd{ID: "nope"}, apierr.ErrUnknownWorker},
		{"end unknown app", cmdEndApp, endAppCmd{App: "nope"}, apierr.ErrUnknownApp},
		{"place for unknown app", cmdPlace, placeCmd{App: "nope"}, apierr.ErrUnknownApp},
		{"stop for unknown app", cmdStopRequest, stopRequestCmd{App: "nope"}, apierr.ErrUnknownApp},
		{"input of unknown app", cmdAppInput, appInputCmd{App: "nope", Input: "grpc://h:1"}, apierr.ErrUnknownApp},
		{"worker without id", cmdRegisterWorker, registerWorkerCmd{}, apierr.ErrBadRequest},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			res := applyTo(t, f, uint64(100+i), tc.typ, tc.cmd)
			if err, _ := res.(error); !errors.Is(err, tc.want) {
				t.Fatalf("got %v, want %v", res, tc.want)
			}
		})
	}
	if res := f.Apply(&raft.Log{Index: 200, Type: raft.LogCommand, Data: []byte{99, '{', '}'}}); res == nil {
		t.Fatal("unknown command type applied silently")
	}
}

func TestFSMForgetsOldApps(t *testing.T) {
	f := newFSM()
	mustApply(t, f, 1, cmdRegisterWorker, registerWorkerCmd{Worker: worker("w1", 4, 4096, 0), TimeMS: 1})
	var apps []string
	for i := 0; i < 5; i++ {
		apps = append(apps, mustApply(t, f, uint64(2+i), cmdRegisterApp, registerAppCmd{Name: "a", TimeMS: int64(10 + i)}).(string))
	}
	// The first app still runs an executor when it ends: it is kept until
	// that executor is stopped.
	mustApply(t, f, 10, cmdPlace, placeCmd{App: apps[0], RequestID: "g", TimeMS: 20, Executors: []*Executor{{ID: "e", Worker: "w1", Cores: 1, MemoryMB: 1}}})
	for i, a := range apps {
		mustApply(t, f, uint64(20+i), cmdEndApp, endAppCmd{App: a, State: pb.AppState_APP_STATE_FINISHED, Retain: 2, TimeMS: int64(30 + i)})
	}
	f.read(func(s *State, _ uint64) {
		if _, ok := s.Apps[apps[0]]; !ok {
			t.Errorf("app with an active executor was forgotten")
		}
		for _, a := range apps[1:3] {
			if _, ok := s.Apps[a]; ok {
				t.Errorf("old app %s kept beyond the retention", a)
			}
		}
		for _, a := range apps[3:] {
			if _, ok := s.Apps[a]; !ok {
				t.Errorf("recent app %s forgotten", a)
			}
		}
	})
}

func TestSnapshotRestore(t *testing.T) {
	f, app := seeded(t)
	mustApply(t, f, 4, cmdPlace, placeCmd{App: app, RequestID: "g1", TimeMS: 5, Executors: []*Executor{
		{ID: "exec-0", Worker: "w1", Cores: 2, MemoryMB: 2048, GPUs: []int{1}},
	}})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	store := raft.NewInmemSnapshotStore()
	sink, err := store.Create(raft.SnapshotVersionMax, 4, 1, raft.Configuration{}, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	metas, _ := store.List()
	_, rc, err := store.Open(metas[0].ID)
	if err != nil {
		t.Fatal(err)
	}
	g := newFSM()
	changed := g.watch()
	if err := g.Restore(rc); err != nil {
		t.Fatal(err)
	}
	select {
	case <-changed:
	default:
		t.Fatal("restore did not notify watchers")
	}
	if a, b := stateJSON(t, f), stateJSON(t, g); !bytes.Equal(a, b) {
		t.Fatalf("restored state differs:\n%s\n%s", a, b)
	}
	// The restored replica goes on applying from where the snapshot was.
	mustApply(t, g, 5, cmdWorkerLost, workerLostCmd{ID: "w1", Message: "gone", TimeMS: 6})
	if st, _ := execState(g, app, "exec-0"); st != pb.ExecutorState_EXECUTOR_STATE_LOST {
		t.Fatalf("after restore and apply: %v", st)
	}

	for _, bad := range []string{`{"version":99,"state":{}}`, `{"version":1}`, `not json`} {
		if err := newFSM().Restore(io.NopCloser(strings.NewReader(bad))); err == nil {
			t.Errorf("restore of %q succeeded", bad)
		}
	}
}

func stateJSON(t *testing.T, f *fsm) []byte {
	t.Helper()
	var b []byte
	f.read(func(s *State, _ uint64) {
		var err error
		if b, err = json.Marshal(s); err != nil {
			t.Fatal(err)
		}
	})
	return b
}
