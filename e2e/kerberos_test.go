package e2e

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestKerberizedHDFSJob: a user who ran kinit trains on data in a
// Kerberos-only HDFS (a real MIT KDC), as on a secure Hadoop cluster's
// gateway; without a ticket the submit stops at once, saying how to get
// one.
func TestKerberizedHDFSJob(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	nnKeytab := kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKeytab := kdc.AddPrincipal("alice")
	cluster := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 2, BlockSize: 128 << 10, Replication: 2,
		Superuser: "alice", KerberosPrincipal: "nn/_HOST@" + krbtest.Realm,
		SASL: hadooprpc.KerberosServer{Keytab: nnKeytab, Protocol: "nn", ServerID: "127.0.0.1"}})
	confDir := t.TempDir()
	if err := cluster.WriteConfig(confDir); err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: confDir, KerberosPrincipal: "alice", KerberosKeytab: aliceKeytab})
	defer res.Close()
	local := generate(t, "parquet", 20000, 2)
	files, _ := filepath.Glob(filepath.Join(local, "part-*"))
	for _, f := range files {
		upload(t, res, f, "hdfs:///data/"+filepath.Base(f))
	}

	ticket := kdc.Kinit("alice", aliceKeytab)
	env := []string{"HADOOP_CONF_DIR=" + confDir, "KRB5_CONFIG=" + kdc.Conf, "KRB5CCNAME=FILE:" + ticket}
	r := spindleEnv(t, t.TempDir(), env, submitArgs("--num-executors", "2", "--input", "hdfs:///data/part-*",
		"--label-column", "label", "--feed", "tensor", "--epochs", "2", "--", logregBin)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if n := len(regexp.MustCompile(`final rank=\d epochs=2 loss=\S+ accuracy=0\.[89]`).FindAllString(r.stdout, -1)); n != 2 {
		t.Fatalf("want 2 ranks to train on the secure HDFS:\n%s", r)
	}

	noTicket := []string{"HADOOP_CONF_DIR=" + confDir, "KRB5_CONFIG=" + kdc.Conf, "KRB5CCNAME=FILE:" + filepath.Join(t.TempDir(), "none")}
	r = spindleEnv(t, t.TempDir(), noTicket, submitArgs("--input", "hdfs:///data/part-*", "--", logregBin)...)
	if r.code != 2 || !strings.Contains(r.stderr, "kinit") {
		t.Fatalf("without a ticket: want exit 2 saying to kinit:\n%s", r)
	}
	r = spindleEnv(t, t.TempDir(), noTicket, submitArgs("--keytab", aliceKeytab, "--input", "hdfs:///data/part-*", "--", logregBin)...)
	if r.code != 2 || !strings.Contains(r.stderr, "--principal") {
		t.Fatalf("a keytab without its principal: want exit 2 naming --principal:\n%s", r)
	}
}
