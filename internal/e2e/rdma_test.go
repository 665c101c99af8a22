package e2e

import (
	"os"
	"strings"
	"testing"
)

// hostHasRDMA reports whether the machine running the tests has RDMA
// devices, which would make a required mode succeed.
func hostHasRDMA() bool {
	entries, err := os.ReadDir("/sys/class/infiniband")
	return err == nil && len(entries) > 0
}

// TestRDMARequiredWithoutDevice: spindle.rdma.mode=required on a host
// without RDMA fails the job before the training command runs, exit 2,
// naming the rank.
func TestRDMARequiredWithoutDevice(t *testing.T) {
	if hostHasRDMA() {
		t.Skip("this host has RDMA devices: a required mode would succeed")
	}
	dir := generate(t, "parquet", 100, 1)
	r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", dir, "--conf", "spindle.rdma.mode=required",
		"--", "sh", "-c", "touch ran-$SPINDLE_RANK")...)
	if r.code != 2 {
		t.Fatalf("want exit status 2:\n%s", r)
	}
	for _, want := range []string{"rank ", "no usable RDMA device", "spindle.rdma.mode is required", "no RDMA devices"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("error lacks %q:\n%s", want, r.stderr)
		}
	}
	for _, rank := range []string{"0", "1"} {
		if _, err := os.Stat(dir + "/ran-" + rank); err == nil {
			t.Errorf("rank %s ran its command", rank)
		}
	}
}

// TestRDMAHintsWithoutDevice: in auto mode on a host without RDMA every
// rank is told to keep off InfiniBand, the driver logs each rank's choice,
// and a variable the user set is left alone.
func TestRDMAHintsWithoutDevice(t *testing.T) {
	if hostHasRDMA() {
		t.Skip("this host has RDMA devices")
	}
	dir := generate(t, "parquet", 100, 1)
	r := spindle(t, dir, submitArgs("--num-executors", "2", "--input", dir, "--conf", "spindle.log.level=info", "--env", "UCX_TLS=tcp",
		"--", "sh", "-c", "echo hints rank=$SPINDLE_RANK nccl_ib_disable=$NCCL_IB_DISABLE ucx_tls=$UCX_TLS")...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	out := r.stdout + r.stderr
	for _, want := range []string{
		"hints rank=0 nccl_ib_disable=1 ucx_tls=tcp", "hints rank=1 nccl_ib_disable=1 ucx_tls=tcp",
		"rank 0 on ", "rank 1 on ", ": TCP (no RDMA devices)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, r)
		}
	}
}
