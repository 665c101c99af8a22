package master

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
)

func stateWith(workers ...Worker) *State {
	s := newState()
	for _, w := range workers {
		w := w
		w.Alive = true
		s.Workers[w.ID] = &w
	}
	s.Apps["app"] = &App{ID: "app", State: 1}
	return s
}

func asks(n, cores int, mem int64, gpus int) []ask {
	out := make([]ask, n)
	for i := range out {
		out[i] = ask{ID: fmt.Sprintf("exec-%d", i), Cores: cores, MemoryMB: mem, GPUs: gpus}
	}
	return out
}

func workersOf(es []*Executor) string {
	var ws []string
	for _, e := range es {
		ws = append(ws, e.Worker)
	}
	return strings.Join(ws, ",")
}

func TestPlace(t *testing.T) {
	three := []Worker{worker("w1", 4, 8192, 0), worker("w2", 4, 8192, 0), worker("w3", 8, 16384, 0)}
	tests := []struct {
		name    string
		workers []Worker
		asks    []ask
		policy  string
		want    string // workers in ask order, or an error substring
	}{
		{"spread round-robins by app executors then free cores", three, asks(4, 1, 1024, 0), PlacementSpread, "w3,w1,w2,w3"},
		{"pack fills the fullest that fits", three, asks(4, 2, 1024, 0), PlacementPack, "w1,w1,w2,w2"},
		{"pack falls over to the next", []Worker{worker("w1", 2, 8192, 0), worker("w2", 4, 8192, 0)}, asks(3, 2, 1024, 0), PlacementPack, "w1,w2,w2"},
		{"memory bound", []Worker{worker("w1", 8, 2048, 0), worker("w2", 8, 2048, 0)}, asks(3, 1, 1024, 0), PlacementSpread, "w1,w2,w1"},
		{"locality preferred when it fits", three, []ask{{ID: "a", Cores: 1, MemoryMB: 1, Preferred: []string{"host-w2"}}}, PlacementSpread, "w2"},
		{"locality ignored when full", []Worker{worker("w1", 1, 100, 0), worker("w2", 4, 100, 0)},
			[]ask{{ID: "a", Cores: 2, MemoryMB: 1, Preferred: []string{"host-w1"}}}, PlacementSpread, "w2"},
		{"no room", []Worker{worker("w1", 4, 4096, 0), worker("w2", 3, 4096, 0)}, asks(4, 2, 2048, 0), PlacementSpread,
			"need 4 executors of 2 cores/2048 MiB, cluster has room for 3: w1 room for 2, w2 room for 1"},
		{"no workers", nil, asks(1, 1, 1, 0), PlacementSpread, "need 1 executor of 1 core/1 MiB, no workers are registered"},
		{"gpus", []Worker{worker("w1", 8, 8192, 2), worker("w2", 8, 8192, 1)}, asks(3, 1, 1, 1), PlacementSpread, "w1,w2,w1"},
		{"not enough gpus", []Worker{worker("w1", 8, 8192, 1)}, asks(2, 1, 1, 1), PlacementSpread,
			"need 2 executors of 1 core/1 MiB/1 GPU, cluster has room for 1: w1 room for 1"},
		{"excluded worker by id", three, []ask{{ID: "a", Cores: 1, MemoryMB: 1, Excluded: []string{"w3"}},
			{ID: "b", Cores: 1, MemoryMB: 1, Excluded: []string{"w3"}}}, PlacementSpread, "w1,w2"},
		{"excluded host", three, []ask{{ID: "a", Cores: 1, MemoryMB: 1, Excluded: []string{"host-w3", "host-w1"}}}, PlacementSpread, "w2"},
		{"excluded everywhere", []Worker{worker("w1", 4, 4096, 0)}, []ask{{ID: "a", Cores: 1, MemoryMB: 1, Excluded: []string{"w1"}}},
			PlacementSpread, "the job keeps off w1 after repeated failures there"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			plan, err := place(stateWith(tc.workers...), "app", tc.asks, tc.policy)
			if err != nil {
				if !errors.Is(err, apierr.ErrNoRoom) || !strings.Contains(err.Error(), tc.want) {
					t.Fatalf("error %q, want one containing %q", err, tc.want)
				}
				return
			}
			if got := workersOf(plan); got != tc.want {
				t.Fatalf("placed on %s, want %s", got, tc.want)
			}
		})
	}
}

// A job's roles ask for different shapes: the big parameter server is
// placed first, so it is not shut out by workers spread over every node.
func TestPlaceMixedRoles(t *testing.T) {
	gang := append(asks(3, 1, 1024, 0), ask{ID: "ps-0", Role: "ps", Cores: 4, MemoryMB: 4096})
	two := []Worker{worker("w1", 4, 8192, 0), worker("w2", 4, 8192, 0)}
	for _, policy := range []string{PlacementSpread, PlacementPack} {
		t.Run(policy, func(t *testing.T) {
			plan, err := place(stateWith(two...), "app", gang, policy)
			if err != nil {
				t.Fatal(err)
			}
			if got := workersOf(plan); got != "w2,w2,w2,w1" {
				t.Fatalf("placed on %s, want w2,w2,w2,w1 (the ps alone on w1)", got)
			}
			if plan[3].ID != "ps-0" || plan[3].Role != "ps" || plan[0].Role != "" {
				t.Fatalf("plan lost the ask order or roles: %+v", plan)
			}
		})
	}
	s := stateWith(worker("w1", 4, 8192, 0), worker("w2", 2, 8192, 0))
	gang = append(asks(2, 1, 1024, 0), ask{ID: "ps-0", Role: "ps", Cores: 8, MemoryMB: 2048})
	_, err := place(s, "app", gang, PlacementSpread)
	want := "need 2 worker of 1 core/1024 MiB and 1 ps of 8 cores/2048 MiB, cluster has room for 6 worker and 0 ps: " +
		"w1 room for 4 worker and 0 ps (4 free cores/8192 MiB), w2 room for 2 worker and 0 ps (2 free cores/8192 MiB)"
	if !errors.Is(err, apierr.ErrNoRoom) || !strings.Contains(err.Error(), want) {
		t.Fatalf("error %q\nwant one containing %q", err, want)
	}
	if fitsEmpty(s, gang) {
		t.Fatal("an 8-core ps fits no 4-core worker")
	}
}

func TestValidRole(t *testing.T) {
	for role, want := range map[string]bool{"": true, "worker": true, "ps": true, "chief": true, "PS": false, "ps-1": false, strings.Repeat("a", 33): false} {
		if got := validRole(role); got != want {
			t.Errorf("validRole(%q) = %v, want %v", role, got, want)
		}
	}
}

func TestPlaceGPUIndices(t *testing.T) {
	s := stateWith(worker("w1", 8, 8192, 4))
	s.Executors["app/old"] = &Executor{App: "app", ID: "old", Worker: "w1", Cores: 1, MemoryMB: 1, GPUs: []int{1}, State: 1}
	plan, err := place(s, "app", asks(2, 1, 1, 1), PlacementPack)
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(plan[0].GPUs, plan[1].GPUs); got != "[0] [2]" {
		t.Fatalf("GPUs %s, want [0] [2] (1 is held)", got)
	}
}

func TestExplainShortfall(t *testing.T) {
	s := stateWith(worker("w1", 4, 8192, 0), worker("w2", 4, 8192, 0), worker("w3", 4, 8192, 0))
	s.Workers["w3"].Alive = false
	s.Executors["app/a"] = &Executor{App: "app", ID: "a", Worker: "w1", Cores: 4, MemoryMB: 8192, State: 2}
	s.Executors["app/b"] = &Executor{App: "app", ID: "b", Worker: "w2", Cores: 3, MemoryMB: 1024, State: 2}
	got := explainNoRoom(s, "app", asks(4, 2, 2048, 0))
	want := "need 4 executors of 2 cores/2048 MiB, cluster has room for 0: w1 full, w2 1 free core, w3 lost"
	if got != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if !fitsEmpty(s, asks(4, 2, 2048, 0)) {
		t.Fatal("4x2 cores fits two empty 4-core workers")
	}
	if fitsEmpty(s, asks(5, 2, 2048, 0)) {
		t.Fatal("5x2 cores does not fit two 4-core workers")
	}
}

func TestCaps(t *testing.T) {
	s := stateWith(worker("w1", 64, 65536, 0))
	s.Executors["app/a"] = &Executor{App: "app", ID: "a", Worker: "w1", Cores: 2, MemoryMB: 1, State: 2}
	tests := []struct {
		name           string
		n, cores       int
		maxExec, maxCo int
		want           string
	}{
		{"no caps", 10, 1, 0, 0, ""},
		{"within", 3, 2, 4, 8, ""},
		{"too many executors", 4, 1, 4, 0, "would have 5 executors; the cluster allows 4 per application (spindle.standalone.maxExecutorsPerApp)"},
		{"too many cores", 2, 4, 0, 8, "would hold 10 cores; the cluster allows 8 per application (spindle.standalone.maxCoresPerApp)"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := checkCaps(s, "app", asks(tc.n, tc.cores, 1, 0), tc.maxExec, tc.maxCo)
			if tc.want == "" {
				if err != nil {
					t.Fatal(err)
				}
				return
			}
			if !errors.Is(err, apierr.ErrOverCap) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %q", err, tc.want)
			}
		})
	}
}

func TestNaturalOrder(t *testing.T) {
	if !naturalLess("exec-2", "exec-10") || naturalLess("exec-10", "exec-2") || !naturalLess("a", "b") {
		t.Fatal("natural order")
	}
}
