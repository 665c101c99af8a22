package e2e

import (
	"bufio"
	"bytes"
	"context"
	"net"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/sysfstest"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/rdma/ucx"
)

// TestRDMACheckDevices: spindle rdma check prints a host's devices (here
// a fake RoCE host's sysfs), what a job selects and whether UCX loads; a
// tree that is not sysfs is bad input, named.
func TestRDMACheckDevices(t *testing.T) {
	t.Parallel()
	root := sysfstest.Unpack(t, filepath.Join(repoRoot, "rdma", "testdata", "roce-mlx5.txtar"))
	r := spindle(t, t.TempDir(), "rdma", "check", "--sysfs", root)
	if r.code != 0 {
		t.Fatalf("rdma check:\n%s", r)
	}
	for _, want := range []string{
		"mlx5_0: MT4119", "port 1: ACTIVE (LinkUp), RoCE v2, 100 Gb/sec", "netdev: eth2 10.10.0.2",
		"GID 3: 0000:0000:0000:0000:0000:ffff:0a0a:0002 RoCE v2 on eth2",
		"uses: mlx5_0 port 1 RoCE v2 on eth2", "\nucx: ",
	} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("output lacks %q:\n%s", want, r)
		}
	}
	r = spindle(t, t.TempDir(), "rdma", "check", "--sysfs", root, "--devices", "mlx4", "--mode", "required")
	if r.code != 0 || !strings.Contains(r.stdout, "and fails: rdma: no usable RDMA device") {
		t.Errorf("required mode with a filter that matches nothing:\n%s", r)
	}
	bad := t.TempDir()
	r = spindle(t, t.TempDir(), "rdma", "check", "--sysfs", bad)
	if r.code != 2 || !strings.Contains(r.stderr, bad) {
		t.Errorf("not a sysfs tree: want exit 2 naming %s:\n%s", bad, r)
	}
}

// TestRDMACheckTwoHosts runs the two-host check over loopback, as two
// processes: latency and bandwidth over the TCP link and (UCX_TLS=tcp)
// the UCX link. A wrong token and an unreachable listener exit 2, naming
// the listener.
func TestRDMACheckTwoHosts(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	listener := exec.CommandContext(ctx, spindleBin, "rdma", "check", "--listen", "127.0.0.1:0")
	listener.Env = append(testEnv(), "UCX_TLS=tcp")
	out, err := listener.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var lerr bytes.Buffer
	listener.Stderr = &lerr
	if err := listener.Start(); err != nil {
		t.Fatal(err)
	}
	defer listener.Process.Kill()
	lines := bufio.NewScanner(out)
	var addr, token string
	for token == "" && lines.Scan() {
		f := strings.Fields(lines.Text())
		switch {
		case len(f) >= 3 && f[0] == "listening":
			addr = f[2]
		case len(f) >= 2 && f[0] == "token":
			token = f[1]
		}
	}
	if addr == "" || token == "" {
		t.Fatalf("the listener said no address and token; stderr:\n%s", lerr.String())
	}

	r := spindleEnv(t, t.TempDir(), []string{"UCX_TLS=tcp", "SPINDLE_RDMA_CHECK_TOKEN=not-the-listeners-token"},
		"rdma", "check", "--peer", addr)
	if r.code != 2 || !strings.Contains(r.stderr, addr) || !strings.Contains(r.stderr, "different token") {
		t.Errorf("wrong token: want exit 2 naming %s:\n%s", addr, r)
	}

	r = spindleEnv(t, t.TempDir(), []string{"UCX_TLS=tcp", "SPINDLE_RDMA_CHECK_TOKEN=" + token},
		"rdma", "check", "--peer", addr, "--pings", "200", "--mib", "32")
	if r.code != 0 {
		t.Fatalf("peer:\n%s\nlistener stderr:\n%s", r, lerr.String())
	}
	var rest strings.Builder
	for lines.Scan() {
		rest.WriteString(lines.Text() + "\n")
	}
	if err := listener.Wait(); err != nil {
		t.Fatalf("listener: %v\n%s\n%s", err, rest.String(), lerr.String())
	}
	t.Logf("peer:\n%s", r.stdout)
	// Both ends are on this host: the TCP link's bytes go through shared
	// memory, UCX's over its TCP transport (UCX_TLS=tcp).
	wants := []string{"tcp link over shared memory: latency "}
	if ok, why := ucx.Available(); ok {
		wants = append(wants, "ucx link over tcp: latency ")
	} else {
		wants = append(wants, "ucx link: not measured: host ", why)
	}
	for _, w := range wants {
		if !strings.Contains(r.stdout, w) {
			t.Errorf("peer's output lacks %q:\n%s", w, r.stdout)
		}
		if !strings.Contains(rest.String(), w) {
			t.Errorf("listener's output lacks %q:\n%s", w, rest.String())
		}
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	gone := ln.Addr().String()
	ln.Close()
	r = spindleEnv(t, t.TempDir(), []string{"SPINDLE_RDMA_CHECK_TOKEN=" + token}, "rdma", "check", "--peer", gone)
	if r.code != 2 || !strings.Contains(r.stderr, "cannot reach the listener at "+gone) {
		t.Errorf("unreachable listener: want exit 2 naming %s:\n%s", gone, r)
	}
}
