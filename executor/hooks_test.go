package executor

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
)

// recordingHook notes its life cycle in a shared log.
type recordingHook struct {
	name    string
	log     *[]string
	prepErr error
}

func (h *recordingHook) Name() string { return h.name }

func (h *recordingHook) Prepare(context.Context, *taskRun) error {
	*h.log = append(*h.log, "prepare "+h.name)
	return h.prepErr
}

func (h *recordingHook) Close() error {
	*h.log = append(*h.log, "close "+h.name)
	return nil
}

// A hook that fails to prepare stops the ones after it from being
// prepared, and only those prepared are closed, in reverse order.
func TestHooksPrepareInOrderCloseInReverse(t *testing.T) {
	var log []string
	hooks := []taskHook{
		&recordingHook{name: "a", log: &log},
		&recordingHook{name: "b", log: &log},
		&recordingHook{name: "c", log: &log, prepErr: errors.New("no socket")},
		&recordingHook{name: "d", log: &log},
	}
	prepared, err := prepareHooks(context.Background(), hooks, &taskRun{})
	if err == nil || err.Error() != "no socket" {
		t.Fatalf("prepare: got %v, want the failing hook's error", err)
	}
	e := &Executor{logger: slog.Default()}
	e.closeHooks(prepared)
	want := []string{"prepare a", "prepare b", "prepare c", "close b", "close a"}
	if !slices.Equal(log, want) {
		t.Fatalf("life cycle %q, want %q", log, want)
	}
}

// The hooks a task gets follow what it asks for, and each comes after
// those it reads from: the feed before the environment, the environment
// before the parameter-server proxy and the GPU sampler, the GPU sampler
// before the observations.
func TestServicesFollowTheTask(t *testing.T) {
	e := &Executor{logger: slog.Default()}
	names := func(hs []taskHook) []string {
		var n []string
		for _, h := range hs {
			n = append(n, h.Name())
		}
		return n
	}
	id := identity{rank: 0, worldSize: 1, peers: []*driverpb.Peer{{Rank: 0, Host: "127.0.0.1", Ports: []uint32{1, 2}}}}
	plain := names(e.services(&Task{Feed: &FeedTask{}}, id))
	if want := []string{"rdma", "environment", "gpu", "observations"}; !slices.Equal(plain, want) {
		t.Fatalf("a task without feed or checkpoints: %q, want %q", plain, want)
	}
	full := names(e.services(&Task{Feed: &FeedTask{Mode: "arrow"}, CheckpointDir: "hdfs:///ck"}, id))
	if want := []string{"feed", "rdma", "environment", "checkpoint", "gpu", "observations"}; !slices.Equal(full, want) {
		t.Fatalf("a fed task with checkpoints: %q, want %q", full, want)
	}
}

// TestTimeoutsFromConfig: New fills the executor's zero timeouts with the
// documented defaults, keeps those set, and the services take theirs from
// the configuration.
func TestTimeoutsFromConfig(t *testing.T) {
	base := Config{DriverAddr: "127.0.0.1:1", ID: "exec-0", Secret: "0123456789abcdef0123456789abcdef", Logger: slog.New(slog.DiscardHandler)}
	e, err := New(base)
	if err != nil {
		t.Fatal(err)
	}
	defer e.conn.Close()
	if c := e.cfg; c.RegisterTimeout != 5*time.Minute || c.ReportTimeout != 5*time.Second ||
		c.PSLeaveTimeout != 10*time.Second || c.GPUSampleTimeout != 5*time.Second {
		t.Fatalf("defaults: register %v, report %v, ps leave %v, gpu sample %v", c.RegisterTimeout, c.ReportTimeout, c.PSLeaveTimeout, c.GPUSampleTimeout)
	}
	set := base
	set.RegisterTimeout, set.ReportTimeout, set.PSLeaveTimeout, set.GPUSampleTimeout = time.Minute, time.Second, 2*time.Second, 3*time.Second
	e, err = New(set)
	if err != nil {
		t.Fatal(err)
	}
	defer e.conn.Close()
	if c := e.cfg; c.RegisterTimeout != time.Minute || c.ReportTimeout != time.Second || c.PSLeaveTimeout != 2*time.Second || c.GPUSampleTimeout != 3*time.Second {
		t.Fatalf("set: %+v", c)
	}
	id := identity{rank: 0, worldSize: 1, peers: []*driverpb.Peer{{Rank: 0, Host: "127.0.0.1", Ports: []uint32{1, 2}}}}
	for _, h := range e.services(&Task{Feed: &FeedTask{}}, id) {
		if g, ok := h.(*gpuHook); ok && g.timeout != 3*time.Second {
			t.Fatalf("the GPU sampler's bound: %v, want the configuration's 3s", g.timeout)
		}
	}
}
