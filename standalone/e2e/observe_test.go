package e2e

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/standalone/client"
)

// startSmallCluster starts one master and one worker of 2 cores and 2
// GPUs, whose processes (and their executors) run with extra in their
// environment.
func startSmallCluster(t *testing.T, extra []string) *cluster {
	t.Helper()
	c := &cluster{t: t, dir: t.TempDir()}
	addr, raft := testaddr.Free(t), testaddr.Free(t)
	c.addrs = []string{addr}
	m := &proc{name: "m1", log: filepath.Join(c.dir, "m1.log"), env: extra, args: append([]string{"master", "--id", "m1", "--addr", addr,
		"--raft-addr", raft, "--peers", fmt.Sprintf("m1=%s@%s", raft, addr), "--data-dir", filepath.Join(c.dir, "m1")}, fastMaster()...)}
	m.start(t)
	w := &proc{name: "w1", log: filepath.Join(c.dir, "w1.log"), env: extra, args: []string{"worker", "--masters", addr, "--id", "w1",
		"--addr", "127.0.0.1:0", "--advertise-host", "127.0.0.1", "--cores", "2", "--memory", "2g", "--gpus", "2",
		"--work-dir", filepath.Join(c.dir, "w1-work"), "--conf", "spindle.worker.heartbeatInterval=200ms"}}
	w.start(t)
	c.masters, c.workers = []*proc{m}, []*proc{w}
	var err error
	c.cl, err = client.New(client.Config{Masters: c.addrs, Secret: secret, AttemptTimeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		c.cl.Close()
		w.kill()
		m.kill()
		if t.Failed() {
			c.dumpLogs()
		}
	})
	c.waitFor(30*time.Second, "the worker alive", func(st *client.Status) bool { return aliveWorkers(st) == 1 })
	return c
}

// fakeGPUs is what the fake nvidia-smi says of the worker's two GPUs:
// busy to different degrees.
var fakeGPUs = map[string]struct {
	util float64
	mib  int64
}{"0": {0.37, 1024}, "1": {0.81, 3072}}

// TestSeeingAStandaloneJob: on a worker with GPUs (and nvidia-smi, here a
// script on its PATH), each rank's GPU use, read for the device the
// worker gave it, reaches the driver: its job page, its /metrics and its
// event log. Once the job ended, spindle logs --master reads its output
// from the worker.
func TestSeeingAStandaloneJob(t *testing.T) {
	t.Parallel()
	bin := t.TempDir()
	script := "#!/bin/sh\necho '0, GPU-aaaa-0000, 37, 1024'\necho '1, GPU-bbbb-1111, 81, 3072'\n"
	if err := os.WriteFile(filepath.Join(bin, "nvidia-smi"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	c := startSmallCluster(t, []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")})
	work := t.TempDir()
	gate, events := filepath.Join(work, "go"), filepath.Join(work, "events")
	j := c.submit(work, "--name", "gpu-use", "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "256m",
		"--executor-gpus", "1", "--conf", "spindle.ui.port=0", "--conf", "spindle.eventLog.dir="+events,
		"--", "/bin/sh", "-c", "echo device=$CUDA_VISIBLE_DEVICES; while [ ! -e "+gate+" ]; do sleep 0.1; done")

	var jobID, ui string
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the web UI's address", func() bool {
		m := regexp.MustCompile(`job (\S+): web UI at (http://\S+/)`).FindStringSubmatch(j.stderr.String())
		if m != nil {
			jobID, ui = m[1], m[2]
		}
		return m != nil
	}))

	devices := map[int]string{}
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("both ranks to print their device", func() bool {
		for _, m := range regexp.MustCompile(`\[rank (\d)\] device=(\d)`).FindAllStringSubmatch(j.stdout.String(), -1) {
			r, _ := strconv.Atoi(m[1])
			devices[r] = m[2]
		}
		return len(devices) == 2
	}))

	if devices[0] == devices[1] {
		t.Fatalf("both ranks were given GPU %s", devices[0])
	}

	var snap jobview.Snapshot
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("both ranks' GPU use on the job page", func() bool {
		if err := getJSON(ui+"api/jobs/"+jobID, &snap); err != nil {
			return false
		}
		n := 0
		for _, r := range snap.Ranks {
			if r.GPUs == 1 {
				n++
			}
		}
		return n == 2
	}))

	for _, r := range snap.Ranks {
		want := fakeGPUs[devices[r.Rank]]
		if r.GPUUtilRatio != want.util || r.GPUMemoryBytes != want.mib<<20 {
			t.Errorf("rank %d on GPU %s shows %.2f busy and %d bytes used, want %.2f and %d MiB",
				r.Rank, devices[r.Rank], r.GPUUtilRatio, r.GPUMemoryBytes, want.util, want.mib)
		}
	}

	fams := scrapeMetrics(t, ui+"metrics")
	for r := 0; r < 2; r++ {
		want := fakeGPUs[devices[r]]
		labels := map[string]string{"role": "worker", "rank": strconv.Itoa(r)}
		if v, ok := gaugeValue(fams, "spindle_rank_gpu_utilization_ratio", labels); !ok || v != want.util {
			t.Errorf("spindle_rank_gpu_utilization_ratio%v = %v (%v), want %v", labels, v, ok, want.util)
		}
		if v, ok := gaugeValue(fams, "spindle_rank_gpu_memory_bytes", labels); !ok || v != float64(want.mib<<20) {
			t.Errorf("spindle_rank_gpu_memory_bytes%v = %v (%v), want %v", labels, v, ok, want.mib<<20)
		}
	}

	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := j.wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("job failed: exit %d\n%s", code, j.stderr.String())
	}
	log, err := os.ReadFile(filepath.Join(events, jobID, "events.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), `"gpu_util_ratio":0.81`) || !strings.Contains(string(log), `"gpu_util_ratio":0.37`) {
		t.Errorf("the event log keeps no GPU use:\n%s", log)
	}
	t.Run("logs from the worker", func(t *testing.T) { logsFromWorkers(t, c, devices) })
}

// logsFromWorkers: spindle logs --master prints a finished job's output
// from the workers, by application name or id, for every rank or one,
// and names what it cannot find.
func logsFromWorkers(t *testing.T, c *cluster, devices map[int]string) {
	st := c.waitFor(10*time.Second, "the application", func(st *client.Status) bool { return len(st.Cluster.GetApps()) == 1 })
	app := st.Cluster.GetApps()[0].GetId()
	for _, tc := range []struct {
		name string
		args []string
		want []string
		not  []string
	}{
		{"every rank by name", []string{"gpu-use"}, []string{"[rank 0] device=" + devices[0] + "\n", "[rank 1] device=" + devices[1] + "\n"}, nil},
		{"one rank by id", []string{"--rank", "1", app}, []string{"[rank 1] device=" + devices[1] + "\n"}, []string{"[rank 0]"}},
		{"by role", []string{"--role", "worker", app}, []string{"[rank 0] device=", "[rank 1] device="}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := spindleCmd(t, append([]string{"logs", "--master", c.masterURL()}, tc.args...)...)
			if code != 0 {
				t.Fatalf("exit %d:\n%s", code, out)
			}
			t.Logf("spindle logs %v:\n%s", tc.args, out)
			for _, w := range tc.want {
				if strings.Count(out, w) != 1 {
					t.Errorf("output has %q %d times, want once:\n%s", w, strings.Count(out, w), out)
				}
			}
			for _, n := range tc.not {
				if strings.Contains(out, n) {
					t.Errorf("output has %q:\n%s", n, out)
				}
			}
		})
	}
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"no such application", []string{"nope"}, `"nope"`},
		{"no such rank", []string{"--rank", "5", app}, "no rank 5"},
		{"no such role", []string{"--role", "ps", app}, `no rank has role "ps"`},
		{"two sources", []string{"--dir", t.TempDir(), app}, "one of --dir, --ui and --master"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := spindleCmd(t, append([]string{"logs", "--master", c.masterURL()}, tc.args...)...)
			if code != 2 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want 2 saying %s:\n%s", code, tc.want, out)
			}
		})
	}
}

func getJSON(url string, v any) error {
	resp, err := http.Get(url)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

func scrapeMetrics(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s does not parse: %v", url, err)
	}
	return fams
}

// gaugeValue is the value of the series of name with labels.
func gaugeValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
next:
	for _, m := range fams[name].GetMetric() {
		if len(m.GetLabel()) != len(labels) {
			continue
		}
		for _, l := range m.GetLabel() {
			if labels[l.GetName()] != l.GetValue() {
				continue next
			}
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}
