package executor

import (
	"context"
	"log/slog"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/syncbuf"
)

// stoppingDriver answers every heartbeat by stopping the job, as a driver
// does once another rank failed.
type stoppingDriver struct {
	driverpb.ControlClient // only Heartbeat is called
	reason                 string
}

func (d stoppingDriver) Heartbeat(ctx context.Context, _ *driverpb.HeartbeatRequest, _ ...grpc.CallOption) (*driverpb.HeartbeatResponse, error) {
	return &driverpb.HeartbeatResponse{Stop: true, Reason: d.reason}, ctx.Err()
}

// TestStoppedWhileLocalizingSaysSo: an executor the driver stops while it
// fetches and unpacks its files says so in its own log, which on YARN is
// its container's stderr: stopped quietly, as a stopped executor exits,
// the container's logs explained nothing.
func TestStoppedWhileLocalizingSaysSo(t *testing.T) {
	var out syncbuf.Buffer
	e := &Executor{cfg: Config{ID: "exec-1"}, logger: slog.New(slog.NewTextHandler(&out, nil)),
		client: stoppingDriver{reason: "rank 0 failed: exit status 1"}}
	task := &Task{HeartbeatIntervalMillis: 10, DriverTimeoutMillis: time.Minute.Milliseconds()}
	stop, err := e.whileLocalizing(context.Background(), task, identity{rank: 1}, func(ctx context.Context) error {
		p := localizeProgressOf(ctx)
		p.expect(40)
		p.read(10)
		<-ctx.Done() // an unpack the stop cuts short
		return ctx.Err()
	})
	if err != nil || stop == nil {
		t.Fatalf("whileLocalizing = %v, %v; want the driver's stop", stop, err)
	}
	log := out.String()
	for _, want := range []string{"stopped while localizing the task's files", "rank 0 failed: exit status 1", "read_bytes=10", "of_bytes=40"} {
		if !strings.Contains(log, want) {
			t.Errorf("the executor's log lacks %q:\n%s", want, log)
		}
	}
}
