package e2e

import (
	"os"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/rdma/ucx"
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
	t.Parallel()
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
	t.Parallel()
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

// TestGoTrainerOverUCX: a Go trainer (examples/logreg, which joins its
// communicator with task.Env.Comm) in a 2-rank local job with
// SPINDLE_COLLECTIVE_LINK=ucx:forced moves its gradients over UCX (here
// over UCX's TCP transport, which needs no RDMA hardware; plain ucx would
// keep two ranks on one host on Spindle's shared memory): each rank logs
// that its data link is ucx, and the ranks still learn the model and end
// with the same weights.
func TestGoTrainerOverUCX(t *testing.T) {
	t.Parallel()
	if ok, why := ucx.Available(); !ok {
		t.Skipf("UCX link not tested: %s", why)
	}
	data := generate(t, "parquet", 20000, 4)
	r := spindle(t, data, submitArgs("--master", "local[2]", "--input", "*.parquet",
		"--env", "SPINDLE_COLLECTIVE_LINK=ucx:forced", "--env", "UCX_TLS=tcp",
		"--label-column", "label", "--feed", "tensor", "--batch-rows", "128", "--epochs", "3",
		"--shuffle", "--seed", "3", "--", logregBin, "--lr", "0.5")...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if n := strings.Count(r.stderr, "data link is ucx"); n != 2 {
		t.Errorf("want 2 ranks logging \"data link is ucx\", got %d:\n%s", n, r)
	}
	checkLogregFinals(t, r, 2)
}

// TestGoTrainerDeclinesUCXWithoutDevice: in auto mode on a host without
// RDMA the executor sets SPINDLE_COLLECTIVE_LINK=ucx:declined, so a Go
// trainer's ranks negotiate and keep to TCP, saying why.
func TestGoTrainerDeclinesUCXWithoutDevice(t *testing.T) {
	t.Parallel()
	if hostHasRDMA() {
		t.Skip("this host has RDMA devices: the ranks would offer UCX")
	}
	data := generate(t, "parquet", 5000, 2)
	r := spindle(t, data, submitArgs("--master", "local[2]", "--input", "*.parquet",
		"--label-column", "label", "--feed", "tensor", "--batch-rows", "128", "--epochs", "1",
		"--", logregBin, "--lr", "0.5")...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if n := regexp.MustCompile(`data link is tcp instead of ucx .*reason="no usable RDMA device on this rank"`).FindAllString(r.stderr, -1); len(n) != 2 {
		t.Errorf("want 2 ranks logging that they keep to tcp for want of a device, got %d:\n%s", len(n), r)
	}
	if strings.Contains(r.stderr, "selected=ucx") {
		// "data link is tcp selected=ucx" read as a contradiction.
		t.Errorf("a rank says ucx was selected while it keeps to tcp:\n%s", r)
	}
	checkLogregFinals(t, r, 2)
}

// checkLogregFinals checks that each of ranks logreg ranks printed its
// final line, with the same weights.
func checkLogregFinals(t *testing.T, r result, ranks int) {
	t.Helper()
	finals := regexp.MustCompile(`\[rank (\d)\] final rank=\d epochs=\d+ loss=(\S+) accuracy=(\S+) weights=(\S+)`).FindAllStringSubmatch(r.stdout, -1)
	if len(finals) != ranks {
		t.Fatalf("want a final line from each of %d ranks:\n%s", ranks, r)
	}
	for _, f := range finals {
		if acc, _ := strconv.ParseFloat(f[3], 64); acc < 0.8 {
			t.Errorf("rank %s accuracy %.3f, want >= 0.8", f[1], acc)
		}
		if f[4] != finals[0][4] {
			t.Errorf("rank %s ended with weights %s, rank %s with %s", f[1], f[4], finals[0][1], finals[0][4])
		}
	}
}
