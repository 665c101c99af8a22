package e2e

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/ortest"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// saveScript trains an SGDClassifier on rank 0, reports its accuracy and
// saves it with spindle.model.save into the job's store, then waits for
// the gate file so the test can read the live job page.
const saveScript = `
import os, sys, time
import numpy as np
import spindle
from sklearn.linear_model import SGDClassifier
gate = sys.argv[1]
if spindle.rank() == 0:
    rng = np.random.default_rng(0)
    x = rng.normal(size=(300, 3)).astype(np.float32)
    y = (x[:, 0] > 0).astype(np.int64)
    clf = SGDClassifier(loss="log_loss", random_state=0).fit(x, y)
    spindle.report(step=1, accuracy=float(clf.score(x, y)))
    v = spindle.model.save(clf, "sgd", example=x[:4], columns=["a", "b", "c"])
    print("saved", v.name, v.version, v.uri, flush=True)
while not os.path.exists(gate):
    time.sleep(0.05)
`

// TestModelSavedInAJob: spindle.model.save inside a job publishes into
// the job's store (spindle.models.dir, given as SPINDLE_MODELS_DIR) with
// the job's id and last reported metrics, and the job's web UI and its
// history page (from the event log) list the model.
func TestModelSavedInAJob(t *testing.T) {
	t.Parallel()
	py := ortest.Python(t)
	if out, err := exec.Command(py, "-c", "import sklearn, skl2onnx").CombinedOutput(); err != nil {
		t.Skipf("skipping: %s cannot import scikit-learn and skl2onnx (make deps installs them): %v %s", py, err, out)
	}
	dir := t.TempDir()
	script, gate := filepath.Join(dir, "save.py"), filepath.Join(dir, "go")
	writeFile(t, script, saveScript)
	models, events := filepath.Join(dir, "models"), filepath.Join(dir, "events")
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	defer cancel()
	cmd, m := startSpindle(t, ctx, dir, uiLine, submitArgs("--num-executors", "2",
		"--conf", "spindle.ui.port=0", "--conf", "spindle.eventLog.dir="+events, "--conf", "spindle.models.dir="+models,
		"--", py, script, gate)...)
	jobID, ui := m[1], m[2]
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()

	var snap jobview.Snapshot
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("the saved model on the job page", func() bool {
		getJSON(t, ui+"api/jobs/"+jobID, &snap)
		return len(snap.Models) == 1
	}))
	saved := snap.Models[0]
	if saved.Name != "sgd" || saved.Version != 1 || saved.Rank != 0 || saved.URI != filepath.Join(models, "sgd", "1") {
		t.Errorf("job page lists %+v", saved)
	}
	if err := os.WriteFile(gate, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("job: %v", err)
	}

	b, err := os.ReadFile(filepath.Join(models, "sgd", "1", "manifest.json"))
	if err != nil {
		t.Fatal(err)
	}
	var man store.Manifest
	if err := json.Unmarshal(b, &man); err != nil {
		t.Fatal(err)
	}
	if man.JobID != jobID || man.Metrics["accuracy"] <= 0.5 || man.Feed == nil || len(man.Feed.Schema) != 3 {
		t.Errorf("manifest %s", b)
	}

	hist, hm := startSpindle(t, ctx, t.TempDir(), historyLine, "history", "--dir", events, "--address", "127.0.0.1:0")
	defer func() { _ = hist.Process.Kill(); _ = hist.Wait() }()
	snap = jobview.Snapshot{}
	getJSON(t, hm[1]+"api/jobs/"+jobID, &snap)
	if len(snap.Models) != 1 || snap.Models[0].URI != saved.URI {
		t.Errorf("history page lists models %+v, want %+v", snap.Models, saved)
	}
	logs, _ := filepath.Glob(filepath.Join(events, "*", "*.jsonl"))
	found := false
	for _, l := range logs {
		if b, err := os.ReadFile(l); err == nil && strings.Contains(string(b), `"kind":"model_saved"`) {
			found = true
		}
	}
	if !found {
		t.Errorf("no model_saved event in the event logs %v", logs)
	}
}
