package am

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/client"
)

func TestDescribe(t *testing.T) {
	for _, tc := range []struct {
		status       int32
		diag         string
		kind         driver.EventKind
		notJobsFault bool
		want         []string
	}{
		{ExitAborted, "Container released on a *lost* node", driver.ExecutorLost, true, []string{"aborted", "lost"}},
		{ExitPreempted, "", driver.ExecutorLost, true, []string{"preempted", "not the job's fault"}},
		{ExitDisksFailed, "all disks bad", driver.ExecutorLost, true, []string{"disks of node nm7 failed", "all disks bad"}},
		{ExitKilledPMem, "Container is running beyond physical memory limits", driver.ExecutorExited, false, []string{"physical memory limit of 1152 MiB", "128 MiB overhead", "spindle.yarn.executor.memoryOverhead"}},
		{ExitKilledVMem, "", driver.ExecutorExited, false, []string{"virtual memory limit"}},
		{137, "Exception from container-launch", driver.ExecutorExited, false, []string{"exited with status 137"}},
		{0, "", driver.ExecutorExited, false, []string{"exited 0"}},
	} {
		st := &pb.ContainerStatusProto{ExitStatus: proto.Int32(tc.status), Diagnostics: proto.String(tc.diag)}
		o := describe(st, "exec-3", "nm7", "container_1_0001_01_000004", 1152, 128, 0)
		if o.kind != tc.kind || o.notJobsFault != tc.notJobsFault {
			t.Errorf("status %d: kind %v fault-free %v", tc.status, o.kind, o.notJobsFault)
		}
		// The driver gets it as an executor event: blameless when YARN
		// took the container back, so the failure policy does not count it.
		ev := outcomeFor{outcome: o, id: "exec-3", host: "nm7", exitStatus: tc.status}.event(time.Unix(5, 0))
		if ev.Blameless != tc.notJobsFault || ev.Kind != tc.kind || ev.ExecutorID != "exec-3" || ev.Host != "nm7" || ev.Message != o.message {
			t.Errorf("status %d: event %+v", tc.status, ev)
		}
		for _, w := range append(tc.want, "exec-3", "container_1_0001_01_000004", "nm7") {
			if !strings.Contains(o.message, w) {
				t.Errorf("status %d: message %q lacks %q", tc.status, o.message, w)
			}
		}
	}
}

// TestDescribeSharedMemory: a container killed for memory names the feed
// memory its executor shares with its training process, which its
// limit includes.
func TestDescribeSharedMemory(t *testing.T) {
	st := &pb.ContainerStatusProto{ExitStatus: proto.Int32(ExitKilledPMem), Diagnostics: proto.String("beyond physical memory limits")}
	o := describe(st, "exec-1", "nm2", "container_1_0001_01_000002", 1344, 128, 192)
	for _, w := range []string{"physical memory limit of 1344 MiB", "128 MiB overhead", "192 MiB of feed memory shared with the training process", "spindle.feed.sharedMemory"} {
		if !strings.Contains(o.message, w) {
			t.Errorf("message %q lacks %q", o.message, w)
		}
	}
	if o := describe(st, "exec-1", "nm2", "container_1_0001_01_000002", 1152, 128, 0); strings.Contains(o.message, "shared") {
		t.Errorf("a container without shared memory: %q", o.message)
	}
}

// TestReleasedIsNoLoss: YARN reports a container the driver released as
// aborted (-100), like one lost with its node; only the lost one is a
// (blameless) loss.
func TestReleasedIsNoLoss(t *testing.T) {
	for _, released := range []bool{false, true} {
		a := &Allocator{cfg: Config{MemoryOverheadMB: 128}, byID: map[string]*container{}, byExec: map[string]*container{}}
		cid := &pb.ContainerIdProto{Id: proto.Int64(2), AppAttemptId: &pb.ApplicationAttemptIdProto{
			ApplicationId: &pb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(5)}, AttemptId: proto.Int32(1)}}
		c := &container{spec: driver.ExecutorSpec{ID: "exec-1", MemoryMB: 256}, c: &pb.ContainerProto{Id: cid}, host: "nm2",
			released: released, done: make(chan struct{})}
		name := client.ContainerString(cid)
		a.byID[name], a.byExec["exec-1"] = c, c
		o, ok := a.completedLocked(&pb.ContainerStatusProto{ContainerId: cid, ExitStatus: proto.Int32(ExitAborted), Diagnostics: proto.String("Container released by application")})
		if !ok {
			t.Fatal("no outcome")
		}
		ev := o.event(time.Now())
		if released && (ev.Kind != driver.ExecutorExited || ev.Blameless || !strings.Contains(ev.Message, "was stopped")) {
			t.Errorf("released: %+v", ev)
		}
		if !released && (ev.Kind != driver.ExecutorLost || !ev.Blameless || !strings.Contains(ev.Message, name)) {
			t.Errorf("lost: %+v", ev)
		}
	}
}

// TestMemoryKillNamesGrantedLimit: a container killed for its memory is
// reported with the limit YARN enforced, the granted size.
func TestMemoryKillNamesGrantedLimit(t *testing.T) {
	a := &Allocator{cfg: Config{MemoryOverheadMB: 128}, byID: map[string]*container{}, byExec: map[string]*container{}}
	cid := &pb.ContainerIdProto{Id: proto.Int64(3), AppAttemptId: &pb.ApplicationAttemptIdProto{
		ApplicationId: &pb.ApplicationIdProto{Id: proto.Int32(1), ClusterTimestamp: proto.Int64(5)}, AttemptId: proto.Int32(1)}}
	c := &container{spec: driver.ExecutorSpec{ID: "exec-2", MemoryMB: 1000}, host: "nm1", done: make(chan struct{}),
		c: &pb.ContainerProto{Id: cid, Resource: &pb.ResourceProto{Memory: proto.Int64(2048)}}}
	a.byID[client.ContainerString(cid)] = c
	o, ok := a.completedLocked(&pb.ContainerStatusProto{ContainerId: cid, ExitStatus: proto.Int32(ExitKilledPMem)})
	if !ok || !strings.Contains(o.message, "physical memory limit of 2048 MiB") || !strings.Contains(o.message, "128 MiB overhead") || o.notJobsFault {
		t.Fatalf("%+v", o)
	}
}
