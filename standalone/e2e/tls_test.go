package e2e

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestTLSFromSpindleTLS: certificates made with spindle tls turn on the
// cluster's mutual TLS in one step: a master and a worker that use them
// work together, status with them sees the worker, and a client without
// them is refused.
func TestTLSFromSpindleTLS(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := filepath.Join(dir, "ca")
	if out, code := spindleCmd(t, "tls", "ca", "--dir", ca); code != 0 {
		t.Fatalf("tls ca: exit %d\n%s", code, out)
	}
	out, code := spindleCmd(t, "tls", "cert", "--ca-dir", ca, "--name", "node", "--hosts", "127.0.0.1,localhost", "--out", filepath.Join(dir, "tls"))
	if code != 0 {
		t.Fatalf("tls cert: exit %d\n%s", code, out)
	}
	// The three settings cert prints are the node's configuration.
	var tlsConf []string
	for _, l := range strings.Split(out, "\n") {
		if k, v, ok := strings.Cut(l, " "); ok && strings.HasPrefix(k, "spindle.cluster.tls.") {
			tlsConf = append(tlsConf, "--conf", k+"="+v)
		}
	}
	if len(tlsConf) != 6 {
		t.Fatalf("tls cert printed no settings:\n%s", out)
	}
	if out, code := spindleCmd(t, "tls", "ca", "--dir", ca); code != 2 || !strings.Contains(out, "ca.pem exists") {
		t.Fatalf("a second CA in the same place: exit %d\n%s", code, out)
	}

	addr, raft := testaddr.Free(t), testaddr.Free(t)
	m := &proc{name: "m1", log: filepath.Join(dir, "m1.log"), args: append(append([]string{"master", "--id", "m1", "--addr", addr,
		"--raft-addr", raft, "--peers", fmt.Sprintf("m1=%s@%s", raft, addr), "--data-dir", filepath.Join(dir, "m1")}, fastMaster()...), tlsConf...)}
	m.start(t)
	defer m.kill()
	w := &proc{name: "w1", log: filepath.Join(dir, "w1.log"), args: append([]string{"worker", "--masters", addr, "--id", "w1",
		"--addr", "127.0.0.1:0", "--advertise-host", "127.0.0.1", "--cores", "1", "--memory", "1g", "--gpus", "0",
		"--work-dir", filepath.Join(dir, "w1-work")}, tlsConf...)}
	w.start(t)
	defer w.kill()

	status := append([]string{"status", "--master", "spindle://" + addr}, tlsConf...)
	testutil.WaitFor(t, 30*time.Second, func() error {
		if out, code := spindleCmd(t, status...); code != 0 || !strings.Contains(out, "w1") {
			return fmt.Errorf("status over TLS does not show the worker: exit %d\n%s", code, out)
		}
		return nil
	})
	if out, code := spindleCmd(t, "status", "--master", "spindle://"+addr, "--timeout", "3s"); code == 0 {
		t.Fatalf("status without TLS succeeded:\n%s", out)
	}
}
