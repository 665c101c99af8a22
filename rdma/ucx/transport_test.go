package ucx

import (
	"log/slog"
	"slices"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/syncbuf"
)

// TestLinkSaysWhatCarriesIt: the UCX link's log line names the transport
// UCX chose: shared memory under UCX_TLS=sm, tcp under UCX_TLS=tcp.
func TestLinkSaysWhatCarriesIt(t *testing.T) {
	for _, tc := range []struct{ tls, over string }{{"sm", overSharedMemory}, {"tcp", overTCP}} {
		t.Run(tc.tls, func(t *testing.T) {
			t.Setenv("UCX_TLS", tc.tls)
			var logs syncbuf.Buffer
			cluster(t, 2, func(rank int, cfg *collective.Config) {
				if rank == 0 {
					cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				}
			})
			want := "data link is ucx over " + tc.over
			if !strings.Contains(logs.String(), want) {
				t.Fatalf("rank 0's log does not say %q:\n%s", want, logs.String())
			}
		})
	}
}

// TestLaneTransports reads the lanes of what UCX 1.13 prints of an
// endpoint.
func TestLaneTransports(t *testing.T) {
	info := `#
# UCP endpoint
#
#               peer: <no debug data>
#                 lane[0]:  2:posix/memory.0 md[2]        -> md[2]/posix/sysdev[255] am am_bw#0
#                 lane[1]:  4:cma/memory.0 md[4]          -> md[4]/cma/sysdev[255] rma_bw#0
#                 lane[2]:  6:tcp/lo.0 md[5]              -> md[5]/tcp/sysdev[255] am_bw#1
#
#                tag_send: 0..<egr/short>..8185..<egr/bcopy>..8192..<egr/zcopy>..20000..<rndv>..(inf)
`
	got := laneTransports(info)
	if want := []string{"posix/memory", "cma/memory", "tcp/lo"}; !slices.Equal(got, want) {
		t.Fatalf("lanes %q, want %q", got, want)
	}
	for _, tc := range []struct {
		tls  []string
		want string
	}{
		{[]string{"posix/memory", "cma/memory"}, overSharedMemory},
		{[]string{"tcp/lo"}, overTCP},
		{[]string{"rc_mlx5/mlx5_0:1", "ud_mlx5/mlx5_0:1"}, overRDMA},
		{[]string{"posix/memory", "tcp/eth0"}, "shared memory+tcp"},
		{[]string{"self/memory"}, ""},
	} {
		if got := overWhat(tc.tls); got != tc.want {
			t.Errorf("overWhat(%q) = %q, want %q", tc.tls, got, tc.want)
		}
	}
}
