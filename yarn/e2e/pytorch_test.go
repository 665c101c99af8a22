package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

// TestPyTorchOnYARN runs the PyTorch example (real torch.distributed with
// gloo, the training script shipped with --files) in YARN containers on
// the real mini cluster, fed from its HDFS, in client and in cluster mode:
// every rank ends with the same model.
func TestPyTorchOnYARN(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("%s cannot import torch and numpy (make deps installs python3-torch): %v", python, err)
	}
	hc := hadooptest.Shared(t)
	script := filepath.Join(testbin.Root(), "examples", "pytorch", "train.py")
	final := regexp.MustCompile(`\[rank (\d)\] final rank=\d loss=(\S+) accuracy=(\S+) params_sha256=([0-9a-f]+)`)
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			input := putData(t, hc, "/data/torch-"+mode)
			code, stdout, stderr := submit(t, hc.ConfDir, 5*time.Minute,
				"--deploy-mode", mode, "--name", "yarn-torch-"+mode, "--num-executors", "2", "--executor-memory", "1g",
				"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "128", "--epochs", "2",
				"--files", script, "--", python, "train.py", "--threads", "1")
			if code != 0 {
				t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
			}
			finals := final.FindAllStringSubmatch(stdout+stderr, -1)
			if len(finals) != 2 {
				t.Fatalf("want a final line from each of 2 ranks\n--- stdout\n%s\n--- stderr\n%s", stdout, stderr)
			}
			if finals[0][4] != finals[1][4] {
				t.Errorf("the ranks ended with different models: %s and %s", finals[0][4][:12], finals[1][4][:12])
			}
			app, rep := report(t, hc, stderr)
			if rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED {
				t.Errorf("application %s ended %v", app, rep.GetFinalApplicationStatus())
			}
			stagingGone(t, hc, app)
		})
	}
}
