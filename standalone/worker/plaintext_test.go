package worker_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/standalone/internal/testcluster"
	"github.com/spindle-ml/spindle/standalone/worker"
)

// TestLaunchRefusesSecretsInPlainText: without cluster TLS a master does
// not send a launch carrying the job's secret to a worker on another
// host; plain variables still go (TestLaunchAndExit), and so do secrets
// to loopback workers (every other test).
func TestLaunchRefusesSecretsInPlainText(t *testing.T) {
	g := testcluster.StartMasters(t, 1, nil)
	// The worker listens on loopback but says masters reach it at a
	// documentation address: another host.
	testcluster.StartWorker(t, g.Addrs(), "w1", func(c *worker.Config) { c.AdvertiseHost = "192.0.2.1" })
	g.WaitWorkers(1)
	c := g.Client()
	id := app(t, c, "remote")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	es := shells(1, 1, 64, 0, "true")
	es[0].Env["SPINDLE_JOB_SECRET"] = "job-secret"
	_, err := request(ctx, c, id, 10*time.Second, es)
	if err == nil || !strings.Contains(err.Error(), "plain text") || !strings.Contains(err.Error(), "w1") ||
		!strings.Contains(err.Error(), "spindle.cluster.plaintextSecrets") {
		t.Fatalf("err = %v, want a refusal naming the worker and the key", err)
	}
}
