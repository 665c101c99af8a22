package ucx

import (
	"context"
	"os"
	"testing"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/rdma"
)

// TestAllReduceOverRDMAHardware is the hardware tier: with
// SPINDLE_TEST_RDMA=1 on a host with a usable RDMA port, ranks allreduce
// over UCX's verbs transports (rc, ud) on the ports the rdma package
// selects, as a job's ranks would, and get the right sums.
func TestAllReduceOverRDMAHardware(t *testing.T) {
	if os.Getenv("SPINDLE_TEST_RDMA") != "1" {
		t.Skip("hardware tier: set SPINDLE_TEST_RDMA=1 on a host with an RDMA device to run")
	}
	plan, err := rdma.Discover(rdma.Config{Mode: rdma.ModeRequired}, nil)
	if err != nil {
		t.Skipf("hardware tier: SPINDLE_TEST_RDMA=1 but no usable RDMA port here: %v", err)
	}
	t.Setenv("UCX_TLS", "rc,ud,self")
	t.Setenv("UCX_NET_DEVICES", plan.Env[rdma.EnvUCXNetDevices])
	t.Logf("ports: %s", plan.Summary)
	const n, count = 2, 1 << 22
	comms := cluster(t, n, nil)
	bufs := make([][]float32, n)
	for r := range n {
		bufs[r] = make([]float32, count)
		for i := range bufs[r] {
			bufs[r][i] = float32(r + i%5)
		}
	}
	for r, err := range onAll(comms, func(c *collective.Comm) error {
		return collective.AllReduce(context.Background(), c, bufs[c.Rank()], collective.Sum)
	}) {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	for r := range n {
		for i, v := range bufs[r] {
			if want := float32(1 + 2*(i%5)); v != want {
				t.Fatalf("rank %d element %d = %v, want %v", r, i, v, want)
			}
		}
	}
}
