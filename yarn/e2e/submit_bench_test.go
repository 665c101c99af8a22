package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// BenchmarkSubmitToRunning measures, for 4 and 16 executors, the time from
// the submit command's start to every executor running (each registered
// with its driver), the way a user waits for it:
//
//   - spindle submit --master yarn on the real mini cluster (3 NodeManagers);
//   - spindle submit on Spindle's standalone cluster (one master, three
//     workers, on this machine);
//   - Spark's own spark-submit --master yarn on the same mini cluster, its
//     driver waiting until as many executors registered (pyspark from
//     PyPI in the bench venv that make bench makes; skipped without it).
//     Spark's jars are uploaded once beforehand (spark.yarn.archive), as a
//     production cluster keeps them, so that each submit does not upload
//     them again.
//
// Each case runs -benchtime times and reports the median in seconds.
func BenchmarkSubmitToRunning(b *testing.B) {
	hc := hadooptest.Shared(b)
	standalone := startStandalone(b)
	spark := sparkSetup(b, hc)
	for _, n := range []int{4, 16} {
		b.Run(fmt.Sprintf("spindle-yarn/executors=%d", n), func(b *testing.B) {
			median(b, func() time.Duration {
				return untilLine(b, exec.Command(spindleBin, "submit", "--master", "yarn", "--conf", "spindle.network.interface=lo",
					"--name", "bench", "--num-executors", strconv.Itoa(n), "--executor-memory", "256m", "--", "true"),
					env(hc.ConfDir), allRegistered)
			})
		})
		b.Run(fmt.Sprintf("spindle-standalone/executors=%d", n), func(b *testing.B) {
			median(b, func() time.Duration {
				return untilLine(b, exec.Command(spindleBin, "submit", "--master", standalone.master, "--conf", "spindle.network.interface=lo",
					"--name", "bench", "--num-executors", strconv.Itoa(n), "--executor-memory", "256m", "--", "true"),
					append(env(""), "SPINDLE_CLUSTER_SECRET="+standalone.secret), allRegistered)
			})
		})
		b.Run(fmt.Sprintf("spark-yarn/executors=%d", n), func(b *testing.B) {
			if spark.skip != "" {
				b.Skip(spark.skip)
			}
			median(b, func() time.Duration {
				cmd := exec.Command(spark.submit, "--master", "yarn", "--deploy-mode", "client", "--name", "bench",
					"--num-executors", strconv.Itoa(n), "--executor-cores", "1",
					// The smallest executors Spark starts: 450 MiB is its floor.
					"--executor-memory", "450m", "--conf", "spark.executor.memoryOverhead=128m",
					"--conf", "spark.yarn.am.memory=450m", "--conf", "spark.yarn.am.memoryOverhead=128m",
					"--conf", "spark.dynamicAllocation.enabled=false", "--conf", "spark.yarn.archive="+spark.archive,
					"--conf", "spark.ui.enabled=false", "--conf", "spark.driver.host=127.0.0.1",
					// The mini cluster's rack mapping is a class of Hadoop's
					// tests, which Spark's Hadoop client does not have.
					"--conf", "spark.hadoop.net.topology.node.switch.mapping.impl=org.apache.hadoop.net.ScriptBasedMapping",
					spark.script, strconv.Itoa(n))
				return untilLine(b, cmd, append(env(hc.ConfDir), "PYSPARK_PYTHON="+spark.python, "SPARK_LOCAL_IP=127.0.0.1"), sparkRunning)
			})
		})
	}
}

var (
	allRegistered = regexp.MustCompile(`all executors registered`)
	sparkRunning  = regexp.MustCompile(`SPARK_EXECUTORS_RUNNING`)
)

// median runs one measurement per iteration and reports their median.
func median(b *testing.B, measure func() time.Duration) {
	var ds []time.Duration
	for range b.N {
		ds = append(ds, measure())
	}
	slices.Sort(ds)
	b.ReportMetric(ds[len(ds)/2].Seconds(), "s-to-running")
	b.ReportMetric(0, "ns/op")
}

// untilLine runs cmd and returns the time from its start to its first
// output line matching re; the command then runs to its end.
func untilLine(b *testing.B, cmd *exec.Cmd, env []string, re *regexp.Regexp) time.Duration {
	b.Helper()
	cmd.Env = env
	pr, pw := io.Pipe()
	cmd.Stdout, cmd.Stderr = pw, pw
	var out strings.Builder
	found := make(chan time.Duration, 1)
	scanned := make(chan struct{})
	go func() {
		defer close(scanned)
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 1<<20)
		for sc.Scan() {
			out.WriteString(sc.Text() + "\n")
			if re.MatchString(sc.Text()) {
				select {
				case found <- 0:
				default:
				}
			}
		}
		io.Copy(io.Discard, pr)
	}()
	start := time.Now()
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait(); pw.Close() }()
	var took time.Duration
	select {
	case <-found:
		took = time.Since(start)
	case err := <-done:
		<-scanned
		b.Fatalf("%s ended (%v) before %s:\n%s", cmd.Args[0], err, re, out.String())
	case <-time.After(testutil.Scale(5 * time.Minute)):
		cmd.Process.Kill()
		<-done
		<-scanned
		b.Fatalf("%s: no %s within 5 minutes:\n%s", cmd.Args[0], re, out.String())
	}
	select {
	case <-done:
	case <-time.After(testutil.Scale(2 * time.Minute)):
		cmd.Process.Kill()
		<-done
	}
	<-scanned
	if testing.Verbose() {
		b.Logf("%s (running after %s):\n%s", strings.Join(cmd.Args, " "), took, out.String())
	}
	return took
}

// standaloneCluster is one master and three workers run as processes.
type standaloneCluster struct {
	master, secret string
}

func startStandalone(b testing.TB) standaloneCluster {
	b.Helper()
	dir := b.TempDir()
	secret := "bench-cluster-secret-0123456789abcdef"
	addr, raft := testaddr.Free(b), testaddr.Free(b)
	e := append(env(""), "SPINDLE_CLUSTER_SECRET="+secret)
	start := func(name string, args ...string) {
		cmd := exec.Command(spindleBin, args...)
		cmd.Env = e
		logf, err := os.Create(filepath.Join(dir, name+".log"))
		if err != nil {
			b.Fatal(err)
		}
		cmd.Stdout, cmd.Stderr = logf, logf
		if err := cmd.Start(); err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { cmd.Process.Kill(); cmd.Wait(); logf.Close() })
	}
	start("m1", "master", "--id", "m1", "--addr", addr, "--raft-addr", raft, "--peers", "m1="+raft+"@"+addr,
		"--data-dir", filepath.Join(dir, "m1"))
	for i := 1; i <= 3; i++ {
		w := fmt.Sprintf("w%d", i)
		start(w, "worker", "--masters", addr, "--id", w, "--addr", testaddr.Free(b), "--cores", "8", "--memory", "4g",
			"--work-dir", filepath.Join(dir, w))
	}
	master := "spindle://" + addr
	err := testutil.Poll(time.Minute, func() error {
		cmd := exec.Command(spindleBin, "status", "--master", master, "--json")
		cmd.Env = e
		out, err := cmd.Output()
		if n := strings.Count(string(out), `"alive": true`); n != 3 || err != nil {
			return fmt.Errorf("%d of 3 workers alive (spindle status: %v)", n, err)
		}
		return nil
	})
	if err != nil {
		b.Fatalf("standalone cluster not up: %v (logs in %s)", err, dir)
	}
	return standaloneCluster{master: master, secret: secret}
}

// sparkSetup finds pyspark in the bench venv and uploads Spark's jars to
// the mini cluster's HDFS once.
type sparkBench struct {
	skip                            string
	submit, python, script, archive string
}

func sparkSetup(b *testing.B, hc *hadooptest.Cluster) sparkBench {
	b.Helper()
	venv := os.Getenv("SPINDLE_BENCH_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-bench-venv")
	}
	python := filepath.Join(venv, "bin", "python")
	out, err := exec.Command(python, "-c", "import pyspark, os; print(os.path.dirname(pyspark.__file__))").Output()
	if err != nil {
		return sparkBench{skip: "Spark's side skipped: no pyspark in " + venv + " (make bench installs it)"}
	}
	home := strings.TrimSpace(string(out))
	dir := b.TempDir()
	// The archive YARN unpacks for Spark's containers: its jars, at the
	// root of a zip.
	archive := filepath.Join(dir, "spark-jars.zip")
	zip := exec.Command(python, "-c", `import sys, zipfile, os
jars = os.path.join(sys.argv[1], "jars")
with zipfile.ZipFile(sys.argv[2], "w", zipfile.ZIP_STORED) as z:
    for f in sorted(os.listdir(jars)):
        z.write(os.path.join(jars, f), f)`, home, archive)
	if out, err := zip.CombinedOutput(); err != nil {
		b.Fatalf("zip Spark's jars: %v\n%s", err, out)
	}
	hdfsArchive := hc.Props["fs.defaultFS"] + "/spark/spark-jars.zip"
	put(b, hc, archive, hdfsArchive)
	script := filepath.Join(dir, "reach.py")
	if err := os.WriteFile(script, []byte(`import sys, time
from pyspark import SparkContext
n = int(sys.argv[1])
sc = SparkContext()
while sc._jsc.sc().getExecutorMemoryStatus().size() - 1 < n:
    time.sleep(0.02)
print("SPARK_EXECUTORS_RUNNING", flush=True)
sc.stop()
`), 0o644); err != nil {
		b.Fatal(err)
	}
	return sparkBench{submit: filepath.Join(home, "bin", "spark-submit"), python: python, script: script, archive: hdfsArchive}
}

// put copies a local file to uri on the mini cluster's HDFS.
func put(tb testing.TB, hc *hadooptest.Cluster, local, uri string) {
	tb.Helper()
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: hc.ConfDir})
	defer r.Close()
	ctx := context.Background()
	h, name, err := r.Resolve(ctx, uri)
	if err != nil {
		tb.Fatal(err)
	}
	if err := h.MkdirAll(ctx, path.Dir(name)); err != nil {
		tb.Fatal(err)
	}
	w, err := h.CreateAtomic(ctx, name)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Abort()
	f, err := os.Open(local)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	if _, err := io.Copy(w, f); err != nil {
		tb.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		tb.Fatal(err)
	}
}

// removeHDFS removes a directory tree from the cluster's HDFS.
func removeHDFS(tb testing.TB, hc *hadooptest.Cluster, dir string) {
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: hc.ConfDir})
	defer r.Close()
	ctx := context.Background()
	h, name, err := r.Resolve(ctx, hc.Props["fs.defaultFS"]+dir)
	if err != nil {
		tb.Logf("remove %s: %v", dir, err)
		return
	}
	var remove func(string) error
	remove = func(p string) error {
		entries, err := h.ReadDir(ctx, p)
		if err != nil {
			return err
		}
		for _, e := range entries {
			child := path.Join(p, e.Name())
			if e.IsDir() {
				if err := remove(child); err != nil {
					return err
				}
				continue
			}
			if err := h.Remove(ctx, child); err != nil {
				return err
			}
		}
		return h.Remove(ctx, p)
	}
	if err := remove(name); err != nil {
		tb.Logf("remove %s: %v", dir, err)
	}
}
