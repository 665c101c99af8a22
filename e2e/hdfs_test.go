package e2e

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// TestJobOnHDFS runs local-mode jobs whose data live in the protocol-level
// test HDFS (multi-block files, replicas on three datanodes), in every
// input format, and checkpoints there: a second job resumes from the
// first one's checkpoint.
func TestJobOnHDFS(t *testing.T) {
	t.Parallel()
	cluster := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 3, BlockSize: 128 << 10, Replication: 2})
	confDir := t.TempDir()
	if err := cluster.WriteConfig(confDir); err != nil {
		t.Fatal(err)
	}
	env := []string{"HADOOP_CONF_DIR=" + confDir, "HADOOP_USER_NAME=" + cluster.Superuser()}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: confDir, User: cluster.Superuser()})
	defer res.Close()

	for _, format := range []string{"parquet", "arrow", "csv"} {
		local := generate(t, format, 20000, 2)
		files, _ := filepath.Glob(filepath.Join(local, "part-*"))
		for _, f := range files {
			upload(t, res, f, "hdfs:///data/"+format+"/"+filepath.Base(f))
		}
	}
	blocks, err := cluster.Blocks("/data/parquet/part-00000.parquet")
	if err != nil || len(blocks) < 2 {
		t.Fatalf("want a multi-block file, got %d blocks (%v)", len(blocks), err)
	}

	for _, format := range []string{"parquet", "arrow", "csv"} {
		t.Run(format, func(t *testing.T) {
			r := spindleEnv(t, t.TempDir(), env, submitArgs("--num-executors", "2",
				"--input", "hdfs:///data/"+format+"/part-*", "--input-format", format, "--label-column", "label",
				"--feed", "tensor", "--batch-rows", "128", "--epochs", "2",
				"--checkpoint-dir", "hdfs:///ckpt/"+format, "--", logregBin)...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			if n := len(regexp.MustCompile(`final rank=\d epochs=2 loss=\S+ accuracy=0\.[89]`).FindAllString(r.stdout, -1)); n != 2 {
				t.Fatalf("want 2 ranks to train to >= 0.8 accuracy:\n%s", r)
			}
			if !strings.Contains(r.stdout, "saved checkpoint hdfs:///ckpt/"+format+"/logreg.json") {
				t.Fatalf("no checkpoint saved:\n%s", r)
			}
		})
	}

	// A second job starts from the first one's weights.
	r := spindleEnv(t, t.TempDir(), env, submitArgs("--num-executors", "2",
		"--input", "hdfs:///data/parquet/", "--label-column", "label", "--feed", "tensor", "--epochs", "1",
		"--checkpoint-dir", "hdfs:///ckpt/parquet", "--", logregBin)...)
	if r.code != 0 || strings.Count(r.stdout, "resumed from checkpoint hdfs:///ckpt/parquet/logreg.json (2 epochs trained)") != 2 {
		t.Fatalf("the second job did not resume from the checkpoint:\n%s", r)
	}

	// Missing data on HDFS is bad input, named.
	r = spindleEnv(t, t.TempDir(), env, "submit", "--input", "hdfs:///data/nope/*.parquet", "--", logregBin)
	if r.code == 0 || !strings.Contains(r.stderr, "/data/nope/*.parquet") {
		t.Fatalf("want an error naming the missing HDFS input:\n%s", r)
	}
}

func upload(t *testing.T, res *fsys.Resolver, local, uri string) {
	t.Helper()
	ctx := context.Background()
	fs, name, err := res.Resolve(ctx, uri)
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll(ctx, filepath.Dir(name)); err != nil {
		t.Fatal(err)
	}
	src, err := os.Open(local)
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	dst, err := fs.CreateAtomic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(dst, src); err != nil {
		t.Fatal(err)
	}
	if err := dst.Commit(); err != nil {
		t.Fatal(err)
	}
}
