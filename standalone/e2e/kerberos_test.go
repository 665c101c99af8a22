package e2e

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/tokenkeeper"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestKerberizedHDFSOnStandalone: on a standalone cluster whose workers have
// no Kerberos ticket, a job reads its input from a Kerberized HDFS (real MIT
// KDC) whose delegation tokens must be renewed every 3 seconds and live 10
// (stretched by the test timescale: a renewal due within a quarter of a
// 1-second interval came late on a loaded machine): the driver logs in with
// the keytab given to spindle submit, obtains tokens for the executors and
// hands them over the control plane as they register (not on a command line,
// not in an environment), renews them, logs in again for fresh ones, and the
// job outlives several generations of tokens.
func TestKerberizedHDFSOnStandalone(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	// No ticket anywhere: not for the workers, not for their executors.
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket-cache"))
	nnKT := kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	hdfs := hdfstest.NewTestCluster(t, hdfstest.Config{
		DataNodes: 1, Superuser: "alice",
		SASL:              hadooprpc.KerberosServer{Keytab: nnKT, Protocol: "nn", ServerID: "127.0.0.1"},
		KerberosPrincipal: "nn/_HOST@" + krbtest.Realm, TokenRenewInterval: testutil.Scale(3 * time.Second), TokenMaxLifetime: testutil.Scale(10 * time.Second),
	})
	conf := t.TempDir()
	if err := hdfs.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	// A new namenode connection, authenticated again, for a call 1 ms
	// after the one before: the job meets its tokens' deadlines.
	core := filepath.Join(conf, "core-site.xml")
	b, err := os.ReadFile(core)
	if err != nil {
		t.Fatal(err)
	}
	b = []byte(strings.Replace(string(b), "</configuration>",
		"<property><name>ipc.client.connection.maxidletime</name><value>1</value></property></configuration>", 1))
	if err := os.WriteFile(core, b, 0o644); err != nil {
		t.Fatal(err)
	}

	// The input, written by alice with her keytab.
	local := generate(t, 3000)
	gw := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, KerberosPrincipal: "alice", KerberosKeytab: aliceKT})
	defer gw.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	files, _ := filepath.Glob(filepath.Join(local, "*.parquet"))
	for _, f := range files {
		h, name, err := gw.Resolve(ctx, hdfs.URI()+"/data/"+filepath.Base(f))
		if err != nil {
			t.Fatal(err)
		}
		if err := h.MkdirAll(ctx, "/data"); err != nil {
			t.Fatal(err)
		}
		w, err := h.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := os.ReadFile(f)
		if _, err := w.Write(data); err != nil {
			t.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			t.Fatal(err)
		}
	}

	c := startCluster(t, 2)
	// The job must outlive a fresh generation of tokens (at three
	// quarters of their 10 s) with its executors reading the input from
	// HDFS every epoch. Its training process sleeps per batch, so the
	// job's length is set by the clock, not by how fast a loaded machine
	// trains: it once trained logreg for 2,000 epochs, 29 s of CPU.
	const batchDelay = 25 * time.Millisecond
	epochs := testutil.PacedEpochs(testutil.Scale(12*time.Second), 3000/2, 64, batchDelay)
	j := c.submit(local, "--name", "kerberized", "--principal", "alice", "--keytab", aliceKT,
		"--conf", "spindle.hadoop.confDir="+conf, "--conf", "spindle.feed.cacheMemory=0",
		"--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--input", hdfs.URI()+"/data/*.parquet", "--label-column", "label", "--feed", "tensor", "--batch-rows", "64",
		"--epochs", strconv.Itoa(epochs), "--seed", "3", "--", feedcheckBin, "--batch-delay", batchDelay.String())
	start := time.Now()
	if code := j.wait(t, 3*time.Minute); code != 0 {
		t.Fatalf("job failed: exit %d\n%s", code, j.stderr.String())
	}
	logs := j.stderr.String()
	ev := tokenkeeper.CountEvents(logs)
	renewals, fresh := ev.Renewed, ev.Fresh
	t.Logf("job took %v: %d renewals, %d fresh generations", time.Since(start).Round(time.Millisecond), renewals, fresh)
	if !strings.Contains(logs, "hdfs delegation token obtained for the executors") || renewals < 2 || fresh < 1 {
		t.Fatalf("%d renewals, %d fresh generations: want the executors' tokens obtained, renewed and replaced\n%s", renewals, fresh, logs)
	}
	if strings.Contains(logs, "password") {
		t.Errorf("the job log may show a token's password")
	}

	// No keytab and no ticket: bad input, before anything runs.
	j = c.submit(local, "--name", "no-ticket", "--conf", "spindle.hadoop.confDir="+conf,
		"--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--input", hdfs.URI()+"/data/*.parquet", "--label-column", "label", "--feed", "tensor", "--", logregBin)
	if code := j.wait(t, time.Minute); code != 2 || !strings.Contains(j.stderr.String(), "kinit") {
		t.Fatalf("a submit with no ticket and no keytab: exit %d, want 2 saying how to log in\n%s", code, j.stderr.String())
	}
}
