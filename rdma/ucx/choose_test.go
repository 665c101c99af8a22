package ucx

import (
	"context"
	"log/slog"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/syncbuf"
)

// TestChooseRoute checks the per-peer choice on facts both ends share:
// UCX only between hosts whose UCX both have RDMA, or when forced.
func TestChooseRoute(t *testing.T) {
	ucx := func(rdma bool) collective.Offer {
		return collective.Offer{Name: Name, Payload: encodePayload(rdma, []byte("addr"))}
	}
	none := collective.Offer{Why: "no libucp"}
	twoHosts := collective.LinkSetup{Peers: []string{"10.0.0.1:7000", "10.0.0.2:7000", "10.0.0.1:7001"}}
	tests := []struct {
		name         string
		a, b         int
		mine, theirs collective.Offer
		forced       bool
		want         route
	}{
		{"rdma between hosts", 0, 1, ucx(true), ucx(true), false, routeUCX},
		{"rdma on one host", 0, 2, ucx(true), ucx(true), false, routeSameHost},
		{"one end without rdma", 0, 1, ucx(true), ucx(false), false, routeNoRDMA},
		{"tcp only between hosts", 0, 1, ucx(false), ucx(false), false, routeNoRDMA},
		{"forced on one host", 0, 2, ucx(false), ucx(false), true, routeUCX},
		{"peer declines", 0, 1, ucx(true), none, true, routeDeclined},
		{"this rank declines", 0, 1, none, ucx(true), false, routeDeclined},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s := twoHosts
			s.Rank = tc.a
			got := chooseRoute(s, tc.b, tc.forced, tc.mine, tc.theirs)
			s.Rank = tc.b
			back := chooseRoute(s, tc.a, tc.forced, tc.theirs, tc.mine)
			if got != tc.want || back != got {
				t.Fatalf("rank %d chose %d, rank %d chose %d; want %d on both", tc.a, got, tc.b, back, tc.want)
			}
		})
	}
}

func TestResourceTransports(t *testing.T) {
	info := `#      resource 0  :  md 0  dev 0  flags -- self/memory0
#      resource 1  :  md 1  dev 1  flags -- tcp/eth0
#      resource 2  :  md 4  dev 3  flags -- rc_mlx5/mlx5_0:1
#            md 1  :  component 1  tcp
`
	got := resourceTransports(info)
	if strings.Join(got, " ") != "self/memory0 tcp/eth0 rc_mlx5/mlx5_0:1" {
		t.Fatalf("got %q", got)
	}
	if !hasRDMA(got) || hasRDMA(got[:2]) {
		t.Fatalf("hasRDMA wrong for %q", got)
	}
}

// TestLinkKeepsToSpindleWhereUCXBringsNothing runs real communicators
// with UCX's tcp transport (no RDMA here): ranks on one host, and ranks
// on two loopback "hosts", keep to Spindle's own link unless UCX is
// forced, and say so in one line.
func TestLinkKeepsToSpindleWhereUCXBringsNothing(t *testing.T) {
	needUCX(t)
	auto := Linker{Spec: collective.LinkSpec{Name: Name, TCP: collective.TCPLinker{}}}
	forced := Linker{Spec: collective.LinkSpec{Name: Name, Forced: true, TCP: collective.TCPLinker{}}}
	tests := []struct {
		name    string
		hosts   []string
		linker  collective.Linker
		log     string
		carrier string // what the link line says carries the bytes
	}{
		{"one host", []string{"127.0.0.1", "127.0.0.1"}, auto,
			"link ucx: 0 peers over UCX, 1 over shared memory (same host), 0 over Spindle's tcp link", `over="shared memory"`},
		{"two hosts without rdma", []string{"127.0.0.1", "127.0.0.2"}, auto,
			"link ucx: 0 peers over UCX, 0 over shared memory (same host), 1 over Spindle's tcp link", "data link is Spindle's own"},
		{"forced", []string{"127.0.0.1", "127.0.0.1"}, forced,
			"link ucx: 1 peers over UCX, 0 over shared memory", "data link is ucx over"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			comms, logs := hostCluster(t, tc.hosts, tc.linker)
			for r := range comms {
				if !strings.Contains(logs[r].String(), tc.log) {
					t.Errorf("rank %d logged %q, want %q", r, logs[r].String(), tc.log)
				}
				if !strings.Contains(logs[r].String(), tc.carrier) {
					t.Errorf("rank %d logged %q, want %q", r, logs[r].String(), tc.carrier)
				}
			}
			checkAllReduce(t, comms, 50_000)
		})
	}
}

// hostCluster starts one in-process rank on each of hosts (loopback
// addresses) with linker, and returns them and their logs.
func hostCluster(t *testing.T, hosts []string, linker collective.Linker) ([]*collective.Comm, []*syncbuf.Buffer) {
	t.Helper()
	comms, errs, logs := startComms(t, hosts, slices.Repeat([]collective.Linker{linker}, len(hosts)), 10*time.Second)
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return comms, logs
}

// checkAllReduce sums count floats, rank r contributing r+1 each, over
// comms, and fails the test unless every rank gets the sum.
func checkAllReduce(t *testing.T, comms []*collective.Comm, count int) {
	t.Helper()
	n := len(comms)
	want := float32(n * (n + 1) / 2)
	bufs := make([][]float32, n)
	for r, err := range onAll(comms, func(c *collective.Comm) error {
		bufs[c.Rank()] = make([]float32, count)
		for i := range bufs[c.Rank()] {
			bufs[c.Rank()][i] = float32(c.Rank() + 1)
		}
		return collective.AllReduce(context.Background(), c, bufs[c.Rank()], collective.Sum)
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
		if bufs[r][0] != want || bufs[r][count-1] != want {
			t.Fatalf("rank %d: got %v, want %v", r, bufs[r][0], want)
		}
	}
}

// startComms starts one in-process rank on each of hosts with its
// linker, each logging into its buffer, and returns what each start
// returned; the test closes the communicators.
func startComms(t *testing.T, hosts []string, linkers []collective.Linker, timeout time.Duration) ([]*collective.Comm, []error, []*syncbuf.Buffer) {
	t.Helper()
	n := len(hosts)
	lns, peers, logs := make([]net.Listener, n), make([]string, n), make([]*syncbuf.Buffer, n)
	for r, h := range hosts {
		ln, err := net.Listen("tcp", net.JoinHostPort(h, "0"))
		if err != nil {
			t.Skipf("cannot listen on %s: %v", h, err)
		}
		lns[r], peers[r], logs[r] = ln, ln.Addr().String(), new(syncbuf.Buffer)
	}
	comms, errs := make([]*collective.Comm, n), make([]error, n)
	var wg sync.WaitGroup
	for r := range n {
		cfg := collective.Config{Rank: r, WorldSize: n, Peers: peers, Listener: lns[r], JobID: "ucx-choice",
			Token: testToken, Timeout: timeout, ConnectTimeout: 2 * timeout, Link: linkers[r],
			Logger: slog.New(slog.NewTextHandler(logs[r], nil))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			comms[r], errs[r] = collective.New(context.Background(), cfg)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range comms {
			if c != nil {
				c.Close()
			}
		}
	})
	return comms, errs, logs
}
