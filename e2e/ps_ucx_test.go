package e2e

import (
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

// The sparse example trains as well with the workers' pulls and pushes
// over UCX (here on UCX's TCP and shared-memory transports, set as a user
// without RDMA hardware would) as over gRPC: the servers serve UCX
// sessions, every worker's client uses them (ucx:required would fail the
// job otherwise), and every acknowledged push was applied.
func TestBuiltinPSOverUCX(t *testing.T) {
	// Not parallel: its four processes of servers and workers beside
	// other tests' jobs missed heartbeats on a 2-core machine.
	if ok, why := ucx.Available(); !ok {
		t.Skipf("UCX data link not tested: %s", why)
	}
	for _, tls := range []string{"tcp", "sm"} {
		t.Run(tls, func(t *testing.T) {
			r := spindle(t, t.TempDir(), submitArgs("--master", "local[2]", "--num-ps", "2",
				"--conf", "spindle.log.level=info",
				"--env", "SPINDLE_COLLECTIVE_LINK=ucx:required", "--env", "UCX_TLS="+tls, "--env", "UCX_LOG_LEVEL=fatal",
				"--", sparseLRBin, "--rows", testbin.SparseLRRows, "--hot", testbin.SparseLRHot)...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			m := sparseLRResult(t, r, "")
			if pushes, _ := strconv.Atoi(m[5]); pushes != 2*testbin.SparseLRSteps*2 {
				t.Errorf("servers applied %d pushes, want the %d acknowledged", pushes, 2*testbin.SparseLRSteps*2)
			}
			out := r.stdout + r.stderr
			if n := strings.Count(out, "parameter-server data link is ucx"); n != 2 {
				t.Errorf("%d workers say their pulls and pushes go over UCX, want 2:\n%s", n, r)
			}
			if n := strings.Count(out, `msg="data link is ucx" ps=`); n != 2 {
				t.Errorf("%d servers say they serve UCX, want 2:\n%s", n, r)
			}
		})
	}
}
