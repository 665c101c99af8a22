package yarn

import (
	"context"
	"fmt"
	"regexp"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/client"
)

// ExitKilled is spindle submit's exit status for a job whose application
// was killed through the ResourceManager (yarn application -kill, spindle
// kill): 128 + SIGTERM, as a shell reports a process terminated so.
const ExitKilled = 143

// killerRE finds who killed an application in its diagnostics: Hadoop's
// "Kill application ... received from alice (auth:SIMPLE) at ...", its
// "killed by user alice", and spindle kill's own reason.
var killerRE = regexp.MustCompile(`(?:received from|killed by user|killed by) ([^\s(]+)`)

// killedMessage says who killed application id, from its final report,
// and reports whether it was killed at all.
func killedMessage(id client.AppID, r *pb.ApplicationReportProto) (string, bool) {
	if r.GetYarnApplicationState() != pb.YarnApplicationStateProto_KILLED &&
		r.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_KILLED {
		return "", false
	}
	who := "a user"
	if m := killerRE.FindStringSubmatch(r.GetDiagnostics()); m != nil {
		who = m[1]
	}
	return fmt.Sprintf("yarn application %s was killed by %s (yarn application -kill / spindle kill)", id, who), true
}

// Killed reports, once a client-mode job has failed, whether it failed
// because its application was killed, and says by whom: executors lost
// with their application are then no failure of the job's own.
func (c *ClusterManager) Killed(ctx context.Context) (string, bool) {
	id, ok := c.AppID()
	if !ok {
		return "", false
	}
	r := c.waitFinal(ctx, id, 10*time.Second)
	if r == nil {
		return "", false
	}
	return killedMessage(id, r)
}
