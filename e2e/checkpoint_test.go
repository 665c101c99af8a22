package e2e

import (
	"context"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// hdfsForJobs starts a test HDFS and returns the environment that points
// spindle at it, and a resolver to look at it.
func hdfsForJobs(t *testing.T) ([]string, *fsys.Resolver) {
	t.Helper()
	cluster := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 2, BlockSize: 128 << 10, Replication: 2})
	confDir := t.TempDir()
	if err := cluster.WriteConfig(confDir); err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: confDir, User: cluster.Superuser()})
	t.Cleanup(func() { res.Close() })
	return []string{"HADOOP_CONF_DIR=" + confDir, "HADOOP_USER_NAME=" + cluster.Superuser()}, res
}

func readHDFS(t *testing.T, res *fsys.Resolver, uri string) string {
	t.Helper()
	ctx := context.Background()
	fsy, name, err := res.Resolve(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsy.Open(ctx, name)
	if err != nil {
		t.Fatalf("open %s: %v", uri, err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestPythonCheckpointsOnHDFS: a Python training process saves and loads
// checkpoints in an hdfs:// --checkpoint-dir through its executor (it
// cannot write HDFS itself), and they land on HDFS whole.
func TestPythonCheckpointsOnHDFS(t *testing.T) {
	t.Parallel()
	env, res := hdfsForJobs(t)
	data := generate(t, "parquet", 100, 1)
	script := `
import os, spindle.checkpoint as c
rank = os.environ["SPINDLE_RANK"]
name = "rank-%s.bin" % rank
blob = (("rank %s " % rank) * 40000).encode()
where = c.save_bytes(blob, name)
back = c.load_bytes(name)
print("saved", where, "loaded back", back == blob, "missing", c.load_bytes("nothing.bin"))
`
	r := spindleEnv(t, data, env, submitArgs("--num-executors", "2", "--input", data,
		"--checkpoint-dir", "hdfs:///user/me/ckpt", "--", python, "-c", script)...)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	for _, rank := range []string{"0", "1"} {
		want := "[rank " + rank + "] saved hdfs:///user/me/ckpt/rank-" + rank + ".bin loaded back True missing None"
		if !strings.Contains(r.stdout, want) {
			t.Errorf("stdout lacks %q:\n%s", want, r.stdout)
		}
		if got := readHDFS(t, res, "hdfs:///user/me/ckpt/rank-"+rank+".bin"); got != strings.Repeat("rank "+rank+" ", 40000) {
			t.Errorf("rank %s's checkpoint on HDFS holds %d bytes, not what was saved", rank, len(got))
		}
	}
}

// TestPyTorchCheckpointOnHDFS: the PyTorch example with an hdfs://
// checkpoint directory saves its model there, and a second job resumes
// from it.
func TestPyTorchCheckpointOnHDFS(t *testing.T) {
	t.Parallel()
	needTorch(t)
	env, res := hdfsForJobs(t)
	data := generateWith(t, "parquet", 4000, 2, 8)
	args := submitArgs("--num-executors", "2", "--input", filepath.Join(data, "*.parquet"), "--label-column", "label",
		"--feed", "tensor", "--batch-rows", "128", "--epochs", "1", "--checkpoint-dir", "hdfs:///user/me/torch",
		"--", python, "examples/pytorch/train.py", "--threads", "1")
	r := spindleEnv(t, repoRoot, env, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "checkpoint=hdfs:///user/me/torch/model.pt") {
		t.Fatalf("first job: want a checkpoint on HDFS:\n%s", r)
	}
	if len(readHDFS(t, res, "hdfs:///user/me/torch/model.pt")) == 0 {
		t.Fatal("the checkpoint on HDFS is empty")
	}
	r = spindleEnv(t, repoRoot, env, args...)
	if r.code != 0 || !strings.Contains(r.stdout, "resumed from model.pt after 1 epochs") {
		t.Fatalf("second job did not resume from the HDFS checkpoint:\n%s", r)
	}
}
