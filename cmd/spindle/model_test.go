package main

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/model/convert"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// runModel runs a spindle command in-process and returns its output and
// exit status.
func runModel(t *testing.T, args ...string) (string, int, error) {
	t.Helper()
	app := newApp()
	var out bytes.Buffer
	app.Writer = &out
	err := app.RunContext(context.Background(), append([]string{"spindle"}, args...))
	code := 0
	if err != nil {
		code = exitCode(err)
	}
	return out.String(), code, err
}

func writeLogReg(t *testing.T, dir string, lr convert.LogReg) {
	t.Helper()
	b, _ := json.Marshal(lr)
	if err := os.WriteFile(filepath.Join(dir, convert.LogRegFile), b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestModelExportListShow: a logreg checkpoint exports into a directory
// and into the store, list and show read the store, and a second export
// is version 2.
func TestModelExportListShow(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	ckpt, models, out := t.TempDir(), filepath.Join(t.TempDir(), "models"), filepath.Join(t.TempDir(), "out")
	writeLogReg(t, ckpt, convert.LogReg{Weights: []float64{0.5, -1, 2}, Bias: 0.1, Epochs: 3})
	for v := 1; v <= 2; v++ {
		stdout, code, err := runModel(t, "model", "export", "--format", "onnx", ckpt, "--out", out, "--name", "ctr",
			"--conf", "spindle.models.dir="+models, "--columns", "a,b,c", "--label-column", "label", "--job-id", "job-7")
		if code != 0 {
			t.Fatalf("export: exit %d: %v", code, err)
		}
		if !strings.Contains(stdout, "logistic regression of 3 features") || !strings.Contains(stdout, "as ctr/") {
			t.Fatalf("export said %q", stdout)
		}
	}
	for _, f := range []string{"model.onnx", "manifest.json"} {
		if _, err := os.Stat(filepath.Join(out, f)); err != nil {
			t.Errorf("--out: %v", err)
		}
	}
	stdout, code, err := runModel(t, "model", "list", "--store", models)
	if code != 0 || !strings.Contains(stdout, "ctr") || !strings.Contains(stdout, "job-7") {
		t.Fatalf("list: exit %d %v:\n%s", code, err, stdout)
	}
	stdout, code, err = runModel(t, "model", "show", models+"/ctr/1")
	if code != 0 {
		t.Fatalf("show: exit %d: %v", code, err)
	}
	var m store.Manifest
	if err := json.Unmarshal([]byte(stdout[strings.Index(stdout, "{"):]), &m); err != nil {
		t.Fatalf("show printed %q: %v", stdout, err)
	}
	if m.Version != 1 || m.JobID != "job-7" || m.Feed.Label != "label" || len(m.Feed.Schema) != 3 || m.Inputs[0].Name != convert.LogRegInput || m.Checkpoint != ckpt {
		t.Fatalf("show: manifest %+v", m)
	}
	if stdout, _, _ := runModel(t, "model", "show", "--store", models, "ctr"); !strings.Contains(stdout, "# ctr/2 at ") {
		t.Fatalf("show of the latest version printed %q", stdout)
	}
}

// TestModelBadInputExitsTwo: each bad input is one line naming it, and
// exit status 2.
func TestModelBadInputExitsTwo(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	ckpt, models, empty := t.TempDir(), filepath.Join(t.TempDir(), "models"), t.TempDir()
	writeLogReg(t, ckpt, convert.LogReg{Weights: []float64{1}, Bias: 0})
	if _, code, err := runModel(t, "model", "export", ckpt, "--name", "ctr", "--store", models); code != 0 {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		says string
	}{
		{[]string{"model", "export", filepath.Join(empty, "nope"), "--out", empty}, filepath.Join(empty, "nope")},
		{[]string{"model", "export", empty, "--out", t.TempDir()}, "no logreg.json"},
		{[]string{"model", "export", ckpt}, "needs --out DIR or --name NAME"},
		{[]string{"model", "export", ckpt, "--format", "pmml", "--out", empty}, `--format "pmml"`},
		{[]string{"model", "export", ckpt, "--name", "a/b", "--store", models}, `model name "a/b"`},
		{[]string{"model", "export", ckpt, "--name", "x"}, "set spindle.models.dir"},
		{[]string{"model", "export", ckpt, "--out", empty, "--columns", "a,b"}, "has 1 weights but --columns names 2"},
		{[]string{"model", "show", "--store", models, "nope"}, "model nope"},
		{[]string{"model", "show", "--store", models, "ctr/9"}, "model ctr version 9"},
		{[]string{"model", "show", "nope"}, "set spindle.models.dir"},
		{[]string{"model", "list", "--store", filepath.Join(empty, "none")}, filepath.Join(empty, "none")},
		{[]string{"model", "publish", "--name", "p", "--store", models, empty}, "model.onnx"},
	} {
		_, code, err := runModel(t, tc.args...)
		if code != exitUsage || err == nil || !strings.Contains(err.Error(), tc.says) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%v: exit %d: %v; want 2 and one line saying %q", tc.args, code, err, tc.says)
		}
	}
}

// TestModelPublishReadsTheSignature: publishing a directory takes the
// model's inputs and outputs from model.onnx and keeps what the given
// manifest says.
func TestModelPublishReadsTheSignature(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	ckpt, models, dir := t.TempDir(), filepath.Join(t.TempDir(), "models"), filepath.Join(t.TempDir(), "m")
	writeLogReg(t, ckpt, convert.LogReg{Weights: []float64{1, 2}, Bias: 0})
	if _, code, err := runModel(t, "model", "export", ckpt, "--out", dir); code != 0 {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "manifest.json"))
	mf := filepath.Join(t.TempDir(), "manifest.json")
	os.WriteFile(mf, []byte(`{"job_id":"job-9","metrics":{"auc":0.75},"frameworks":{"torch":"1.13.1"}}`), 0o644)
	if stdout, code, err := runModel(t, "model", "publish", dir, "--name", "p", "--store", models, "--manifest", mf); code != 0 || !strings.Contains(stdout, "published p/1") {
		t.Fatalf("publish: exit %d %v: %s", code, err, stdout)
	}
	stdout, _, _ := runModel(t, "model", "show", "--store", models, "p")
	var m store.Manifest
	if err := json.Unmarshal([]byte(stdout[strings.Index(stdout, "{"):]), &m); err != nil {
		t.Fatal(err)
	}
	if m.JobID != "job-9" || m.Metrics["auc"] != 0.75 || len(m.Inputs) != 1 || m.Inputs[0].Shape[1] != 2 || m.Outputs[0].Type != "double" {
		t.Fatalf("manifest %+v", m)
	}
}

// TestModelStoreOnHDFS: export, list and show work the same with the
// store and --out on HDFS.
func TestModelStoreOnHDFS(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	c := hdfstest.NewTestCluster(t, hdfstest.Config{})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	hadoop := []string{"--conf", "spindle.hadoop.confDir=" + conf, "--conf", "spindle.hadoop.user=" + c.Superuser()}
	ckpt := t.TempDir()
	writeLogReg(t, ckpt, convert.LogReg{Weights: []float64{1, 2, 3}, Bias: 1})
	models, out := c.URI()+"/models", c.URI()+"/out/lr"
	if stdout, code, err := runModel(t, append([]string{"model", "export", ckpt, "--name", "lr", "--store", models, "--out", out}, hadoop...)...); code != 0 {
		t.Fatalf("export: exit %d %v: %s", code, err, stdout)
	}
	stdout, code, err := runModel(t, append([]string{"model", "show", models + "/lr/1"}, hadoop...)...)
	if code != 0 || !strings.Contains(stdout, "# lr/1 at "+models+"/lr/1") || !strings.Contains(stdout, `"sha256"`) {
		t.Fatalf("show: exit %d %v:\n%s", code, err, stdout)
	}
	stdout, code, err = runModel(t, append([]string{"model", "show", out + "/x"}, hadoop...)...)
	if code != exitUsage || !strings.Contains(err.Error(), "model x") {
		t.Fatalf("show of a missing model on HDFS: exit %d %v %s", code, err, stdout)
	}
}
