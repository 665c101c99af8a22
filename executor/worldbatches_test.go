package executor

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/task"
)

// TestWorldBatchesRideEveryHeartbeat: a trainer's report of how far its
// shrunk world was in the epoch (task.Env.ReportWorldBatches) reaches the
// executor through the real report socket with the membership version it
// was made under, and every later heartbeat repeats it, so that the
// driver gets it even when one heartbeat is lost.
func TestWorldBatchesRideEveryHeartbeat(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(dir, "report.sock")
	obs, cancel, done := runObservations(t, sock)
	ctx := context.Background()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	}()

	membership := filepath.Join(dir, "membership.json")
	if err := os.WriteFile(membership, []byte(`{"version": 2, "peers": ["a:1", "b:1", "c:1"], "incarnations": [2, 0, 0], "joined": -1, "left": [1]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv(task.EnvReportSocket, sock)
	env := task.Env{WorldSize: 4, MembershipFile: membership}
	if err := env.ReportWorldBatches(ctx, 1, 21); err != nil {
		t.Fatal(err)
	}
	var hb driverpb.HeartbeatRequest
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the report in a heartbeat", func() bool {
		obs.take(&hb)
		return hb.WorldBatches != nil
	}))
	want := &driverpb.WorldBatches{MembershipVersion: 2, Epoch: 1, Batches: 21}
	if w := hb.GetWorldBatches(); w.GetMembershipVersion() != want.MembershipVersion || w.GetEpoch() != want.Epoch || w.GetBatches() != want.Batches {
		t.Fatalf("heartbeat carries %v, want %v", w, want)
	}
	var next driverpb.HeartbeatRequest
	obs.take(&next)
	if next.GetWorldBatches().GetBatches() != 21 {
		t.Fatalf("the next heartbeat carries %v, want the report again", next.GetWorldBatches())
	}
	// An older membership's report does not replace a newer one's.
	obs.take1([]byte(`{"world_batches": {"version": 1, "epoch": 0, "batches": 5}}`))
	obs.take(&next)
	if next.GetWorldBatches().GetMembershipVersion() != 2 {
		t.Fatalf("an older report replaced the newer: %v", next.GetWorldBatches())
	}
}
