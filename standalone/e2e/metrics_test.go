package e2e

import (
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestMastersAndWorkersServeMetrics: with --metrics-addr a master and a
// worker serve Prometheus metrics that Prometheus's own parser reads, named
// by its conventions.
func TestMastersAndWorkersServeMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr, raft, mMetrics, wMetrics := testaddr.Free(t), testaddr.Free(t), testaddr.Free(t), testaddr.Free(t)
	m := &proc{name: "m1", log: filepath.Join(dir, "m1.log"), args: append([]string{"master", "--id", "m1", "--addr", addr,
		"--raft-addr", raft, "--peers", fmt.Sprintf("m1=%s@%s", raft, addr), "--data-dir", filepath.Join(dir, "m1"),
		"--metrics-addr", mMetrics}, fastMaster()...)}
	m.start(t)
	defer m.kill()
	w := &proc{name: "w1", log: filepath.Join(dir, "w1.log"), args: []string{"worker", "--masters", addr, "--id", "w1",
		"--addr", "127.0.0.1:0", "--advertise-host", "127.0.0.1", "--cores", "3", "--memory", "1g", "--gpus", "0",
		"--work-dir", filepath.Join(dir, "w1"), "--metrics-addr", wMetrics}}
	w.start(t)
	defer w.kill()

	scrape := func(addr string) map[string]*dto.MetricFamily {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err != nil {
			return nil
		}
		defer resp.Body.Close()
		parser := expfmt.NewTextParser(model.UTF8Validation)
		fams, err := parser.TextToMetricFamilies(resp.Body)
		if err != nil {
			t.Fatalf("/metrics on %s does not parse: %v", addr, err)
		}
		return fams
	}
	value := func(fams map[string]*dto.MetricFamily, name, label, want string) (float64, bool) {
		for _, mt := range fams[name].GetMetric() {
			if label == "" {
				return mt.GetGauge().GetValue() + mt.GetCounter().GetValue(), true
			}
			for _, l := range mt.GetLabel() {
				if l.GetName() == label && l.GetValue() == want {
					return mt.GetGauge().GetValue(), true
				}
			}
		}
		return 0, false
	}
	var mf, wf map[string]*dto.MetricFamily
	testutil.WaitFor(t, 30*time.Second, func() error {
		mf, wf = scrape(mMetrics), scrape(wMetrics)
		if v, _ := value(mf, "spindle_workers", "state", "alive"); v != 1 {
			return fmt.Errorf("spindle_workers{state=alive} = %v, want 1", v)
		}
		return nil
	})
	if v, _ := value(mf, "spindle_master_is_leader", "", ""); v != 1 {
		t.Errorf("the only master does not say it leads: %v", mf["spindle_master_is_leader"])
	}
	if v, _ := value(mf, "spindle_workers", "state", "alive"); v != 1 {
		t.Errorf("spindle_workers{state=alive} = %v, want 1", v)
	}
	if v, _ := value(mf, "spindle_cluster_capacity", "resource", "cores"); v != 3 {
		t.Errorf("cluster cores %v, want 3", v)
	}
	if v, _ := value(wf, "spindle_worker_capacity", "resource", "memory_bytes"); v != 1<<30 {
		t.Errorf("worker memory %v bytes, want 1 GiB", v)
	}
	for _, fams := range []map[string]*dto.MetricFamily{mf, wf} {
		for name, f := range fams {
			if strings.HasPrefix(name, "go_") || strings.HasPrefix(name, "process_") || strings.HasPrefix(name, "promhttp_") {
				continue
			}
			if !strings.HasPrefix(name, "spindle_") {
				t.Errorf("metric %s lacks the spindle_ prefix", name)
			}
			if f.GetType() == dto.MetricType_COUNTER && !strings.HasSuffix(name, "_total") {
				t.Errorf("counter %s does not end in _total", name)
			}
		}
	}
}
