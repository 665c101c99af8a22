package driver

import (
	"context"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// keeperFixture is a CredentialKeeper holding a generation the test sets.
type keeperFixture struct {
	mu    sync.Mutex
	creds *driverpb.Credentials
	inUse []int64
}

func (k *keeperFixture) ExecutorCredentials() *driverpb.Credentials {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.creds
}

func (k *keeperFixture) CredentialsInUse(g int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.inUse = append(k.inUse, g)
}

// TestHeartbeatCredentials: an executor that reports an older credentials
// generation gets the newest in its heartbeat answer, one that has them
// gets none, and the keeper hears a generation is in use only once every
// running executor reported it (an exited one does not hold it back).
func TestHeartbeatCredentials(t *testing.T) {
	g := newRoster([]string{"exec-0", "exec-1", "exec-2"})
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	g.now = func() time.Time { return now }
	for _, id := range []string{"exec-0", "exec-1", "exec-2"} {
		register(t, g, id, "h")
	}
	k := &keeperFixture{creds: &driverpb.Credentials{Generation: 1, File: []byte("gen1")}}
	s := &controlServer{roster: g, logger: slog.New(slog.NewTextHandler(io.Discard, nil)), creds: k}
	ctx := context.Background()
	beat := func(id string, gen int64) *driverpb.Credentials {
		t.Helper()
		resp, err := s.Heartbeat(ctx, &driverpb.HeartbeatRequest{ExecutorId: id, CredentialsGeneration: gen})
		if err != nil {
			t.Fatal(err)
		}
		return resp.GetCredentials()
	}
	for _, tc := range []struct {
		name     string
		id       string
		reports  int64
		newest   int64 // the keeper's generation before the heartbeat
		gets     int64 // 0: none
		inUseNow []int64
	}{
		{"launch tokens get generation 1", "exec-0", 0, 1, 1, nil},
		{"generation 1 gets nothing", "exec-0", 1, 1, 0, nil},
		{"another still on launch tokens", "exec-1", 0, 1, 1, nil},
		{"fresh tokens reach an executor", "exec-0", 1, 2, 2, nil},
		{"exec-1 moves to 2", "exec-1", 2, 2, 0, nil},
		{"exec-2 on 1: 1 in use by all", "exec-2", 1, 2, 2, []int64{1}},
		{"exec-2 on 2, exec-0 still on 1", "exec-2", 2, 2, 0, []int64{1, 1}},
		{"exec-0 on 2: 2 in use by all", "exec-0", 2, 2, 0, []int64{1, 1, 2}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			k.mu.Lock()
			k.creds = &driverpb.Credentials{Generation: tc.newest, File: []byte("blob")}
			k.mu.Unlock()
			got := beat(tc.id, tc.reports)
			if got.GetGeneration() != tc.gets {
				t.Fatalf("heartbeat of %s at generation %d got generation %d, want %d", tc.id, tc.reports, got.GetGeneration(), tc.gets)
			}
			k.mu.Lock()
			inUse := append([]int64(nil), k.inUse...)
			k.mu.Unlock()
			if len(inUse) != len(tc.inUseNow) {
				t.Fatalf("keeper heard %v, want %v", inUse, tc.inUseNow)
			}
			for i := range inUse {
				if inUse[i] != tc.inUseNow[i] {
					t.Fatalf("keeper heard %v, want %v", inUse, tc.inUseNow)
				}
			}
		})
	}
	// An exited executor does not hold a generation back.
	k.creds = &driverpb.Credentials{Generation: 3}
	beat("exec-0", 3)
	beat("exec-1", 3)
	if err := g.exit(&driverpb.ExitReport{ExecutorId: "exec-2"}); err != nil {
		t.Fatal(err)
	}
	n := len(k.inUse)
	beat("exec-1", 3)
	if len(k.inUse) != n {
		t.Fatalf("a heartbeat that changed nothing looked again at once: %v", k.inUse)
	}
	now = now.Add(credScanEvery)
	beat("exec-1", 3)
	if last := k.inUse[len(k.inUse)-1]; last != 3 {
		t.Fatalf("with exec-2 gone, the keeper heard %v, want 3 last", k.inUse)
	}
}
