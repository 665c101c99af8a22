package yarn

import (
	"strings"
	"testing"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/yarn/client"
)

// TestKilledMessage: a killed application's report names who killed it,
// in the ways Hadoop and spindle kill word it; other endings are not kills.
func TestKilledMessage(t *testing.T) {
	id, _ := client.ParseAppID("application_1_0002")
	killed := pb.YarnApplicationStateProto_KILLED
	for _, tc := range []struct {
		name  string
		state pb.YarnApplicationStateProto
		diag  string
		want  string
	}{
		{"hadoop's kill", killed, "Application application_1_0002 was killed by user alice at 127.0.0.1", "killed by alice ("},
		{"kill request", killed, "Kill application application_1_0002 received from bob (auth:SIMPLE) at 127.0.0.1", "killed by bob ("},
		{"no name", killed, "", "killed by a user ("},
		{"failed", pb.YarnApplicationStateProto_FAILED, "killed by user alice", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &pb.ApplicationReportProto{YarnApplicationState: tc.state.Enum(), Diagnostics: &tc.diag}
			msg, ok := killedMessage(id, r)
			if ok != (tc.want != "") || (ok && !strings.Contains(msg, tc.want)) {
				t.Fatalf("killedMessage = %q, %v; want %q", msg, ok, tc.want)
			}
		})
	}
}
