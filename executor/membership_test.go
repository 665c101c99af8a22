package executor

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// replacingDriver answers heartbeats with a membership in which rank 1
// was replaced, until the executor says it has it.
type replacingDriver struct {
	driverpb.ControlClient // only Heartbeat is called
	membership             *driverpb.Membership

	mu   sync.Mutex
	seen []int64 // the membership versions heartbeats carried
}

func (d *replacingDriver) Heartbeat(_ context.Context, req *driverpb.HeartbeatRequest, _ ...grpc.CallOption) (*driverpb.HeartbeatResponse, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.seen = append(d.seen, req.GetMembershipVersion())
	if req.GetMembershipVersion() < d.membership.GetVersion() {
		return &driverpb.HeartbeatResponse{Membership: d.membership}, nil
	}
	return &driverpb.HeartbeatResponse{}, nil
}

func (d *replacingDriver) has(version int64) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Contains(d.seen, version)
}

// TestHeartbeatHandsTheProcessANewMembership: the membership file holds
// the gang as it started (every incarnation 0); once a heartbeat response
// brings a newer membership (a lost rank replaced alone), the executor
// rewrites the file with the replacement's peer address and incarnation,
// and its next heartbeats say it has that version.
func TestHeartbeatHandsTheProcessANewMembership(t *testing.T) {
	peer := func(rank int, host string, port uint32) *driverpb.Peer {
		return &driverpb.Peer{Rank: int32(rank), Host: host, Ports: []uint32{port, port + 1}}
	}
	peers := []*driverpb.Peer{peer(0, "10.0.0.1", 5000), peer(1, "10.0.0.2", 6000), peer(2, "10.0.0.3", 7000)}
	dir := t.TempDir()
	r := &taskRun{t: &Task{ReplacesWorkers: true}, id: identity{rank: 0, worldSize: 3, peers: peers}, filesDir: filepath.Join(dir, "files")}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	h := &membershipHook{logger: logger}
	if err := h.Prepare(context.Background(), r); err != nil {
		t.Fatal(err)
	}
	read := func() membershipJSON {
		t.Helper()
		b, err := os.ReadFile(membershipPath(r.filesDir))
		if err != nil {
			t.Fatal(err)
		}
		var m membershipJSON
		if err := json.Unmarshal(b, &m); err != nil {
			t.Fatalf("membership file %q: %v", b, err)
		}
		return m
	}
	if m := read(); m.Version != 0 || !slices.Equal(m.Incarnations, []uint32{0, 0, 0}) || m.Peers[1] != "10.0.0.2:6000" {
		t.Fatalf("membership at the start %+v, want version 0 with every rank's first incarnation", m)
	}

	moved := slices.Clone(peers)
	moved[1] = peer(1, "10.0.0.9", 6100)
	drv := &replacingDriver{membership: &driverpb.Membership{Version: 1, Peers: moved, Incarnations: []uint32{0, 1, 0}, Joined: 1}}
	e := &Executor{cfg: Config{ID: "exec-0"}, logger: logger, client: drv}
	task := &Task{HeartbeatIntervalMillis: 10, DriverTimeoutMillis: testutil.Scale(10 * time.Second).Milliseconds()}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, _, err := e.heartbeat(ctx, task, r.id, nil, &observations{logger: logger}, r.membership)
		done <- err
	}()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("heartbeat: %v", err)
		}
	}()
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("a heartbeat with membership version 1", func() bool { return drv.has(1) }))
	if m := read(); m.Version != 1 || m.Joined != 1 || !slices.Equal(m.Incarnations, []uint32{0, 1, 0}) ||
		!slices.Equal(m.Peers, []string{"10.0.0.1:5000", "10.0.0.9:6100", "10.0.0.3:7000"}) {
		t.Fatalf("membership %+v, want version 1 with rank 1's replacement at 10.0.0.9:6100 in incarnation 1", m)
	}
}

// TestShrunkMembershipNamesWhoLeft: a membership of a world that shrank
// reaches the process as the survivors' addresses in their old order and
// the rank that left, which task.Env.Rejoin reads to shrink in place,
// and their rendezvous addresses, where spindle.torch.reform meets.
func TestShrunkMembershipNamesWhoLeft(t *testing.T) {
	peer := func(rank int, host string) *driverpb.Peer {
		return &driverpb.Peer{Rank: int32(rank), Host: host, Ports: []uint32{5000, 5001}}
	}
	dir := t.TempDir()
	h := &membershipHook{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), path: filepath.Join(dir, "membership.json")}
	err := h.update(&driverpb.Membership{Version: 1, Peers: []*driverpb.Peer{peer(0, "10.0.0.1"), peer(1, "10.0.0.3")},
		Incarnations: []uint32{1, 0}, Joined: -1, Left: []int32{1}})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(h.path)
	if err != nil {
		t.Fatal(err)
	}
	var m membershipJSON
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	if m.Version != 1 || !slices.Equal(m.Left, []int{1}) || !slices.Equal(m.Peers, []string{"10.0.0.1:5000", "10.0.0.3:5000"}) ||
		!slices.Equal(m.Incarnations, []uint32{1, 0}) || !slices.Equal(m.Services, []string{"10.0.0.1:5001", "10.0.0.3:5001"}) {
		t.Fatalf("membership file %s, want version 1 of the two survivors with rank 1 left", b)
	}
}
