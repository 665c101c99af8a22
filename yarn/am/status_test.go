package am

import (
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadooppb"
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
		o := describe(st, "exec-3", "nm7", "container_1_0001_01_000004", 1152, 128)
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
