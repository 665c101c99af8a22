package am

import (
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
)

// YARN's special container exit statuses (ContainerExitStatus).
const (
	ExitSuccess           = 0
	ExitInvalid           = -1000
	ExitAborted           = -100 // released by the AM, or lost with its node
	ExitDisksFailed       = -101
	ExitPreempted         = -102
	ExitKilledVMem        = -103
	ExitKilledPMem        = -104
	ExitKilledByAM        = -105
	ExitKilledByRM        = -106
	ExitKilledAppFinished = -107
	ExitKilledExcess      = -108
)

// outcome is what a completed container means for the job.
type outcome struct {
	kind     driver.EventKind
	exitCode int
	message  string
	// notJobsFault marks losses YARN caused (preemption, a lost node): the
	// executor may be replaced without counting against the job.
	notJobsFault bool
}

// describe turns a completed container's status into an executor event,
// naming the executor, host, container and YARN's reason.
func describe(st *pb.ContainerStatusProto, execID, host, container string, limitMB, overheadMB, sharedMB int) outcome {
	code := int(st.GetExitStatus())
	diag := strings.TrimSpace(st.GetDiagnostics())
	if len(diag) > 400 {
		diag = diag[:400] + "..."
	}
	where := fmt.Sprintf("executor %s (container %s on %s)", execID, container, host)
	switch code {
	case ExitAborted:
		return outcome{driver.ExecutorLost, code, fmt.Sprintf("%s was aborted by YARN (released, or lost with its node): %s", where, diag), true}
	case ExitPreempted:
		return outcome{driver.ExecutorLost, code, fmt.Sprintf("%s was preempted by YARN for another application; not the job's fault", where), true}
	case ExitDisksFailed:
		return outcome{driver.ExecutorLost, code, fmt.Sprintf("%s ended because the disks of node %s failed: %s", where, host, diag), true}
	case ExitKilledVMem, ExitKilledPMem:
		kind := "physical"
		if code == ExitKilledVMem {
			kind = "virtual"
		}
		return outcome{driver.ExecutorExited, code, fmt.Sprintf("%s was killed by YARN for exceeding its %s memory limit of %d MiB (executor memory plus %d MiB overhead%s; raise --executor-memory or spindle.yarn.executor.memoryOverhead): %s",
			where, kind, limitMB, overheadMB, SharedPhrase(sharedMB), diag), false}
	case ExitKilledByAM, ExitKilledAppFinished:
		return outcome{driver.ExecutorExited, -1, fmt.Sprintf("%s was stopped", where), false}
	case ExitKilledByRM, ExitKilledExcess:
		return outcome{driver.ExecutorLost, code, fmt.Sprintf("%s was killed by the ResourceManager: %s", where, diag), false}
	case ExitSuccess:
		return outcome{driver.ExecutorExited, 0, where + " exited 0", false}
	}
	return outcome{driver.ExecutorExited, code, fmt.Sprintf("%s exited with status %d: %s", where, code, diag), false}
}
