package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

const python = "/usr/bin/python3"

func needTorch(t *testing.T) {
	t.Helper()
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("%s cannot import torch and numpy (make deps installs python3-torch): %v", python, err)
	}
}

var torchFinal = regexp.MustCompile(`\[rank (\d)\] final rank=\d loss=(\S+) accuracy=(\S+) params_sha256=([0-9a-f]+)`)

// TestPyTorchDDP runs the PyTorch example with 2 and 3 ranks over both
// socket feeds: real torch.distributed with gloo, rendezvous through the
// environment Spindle fills in, gradients exchanged peer to peer.
func TestPyTorchDDP(t *testing.T) {
	t.Parallel()
	needTorch(t)
	data := generateWith(t, "parquet", 12000, 3, 8)
	for _, tc := range []struct {
		ranks int
		feed  string
	}{{2, "tensor"}, {3, "arrow"}} {
		t.Run(fmt.Sprintf("%d-ranks-%s", tc.ranks, tc.feed), func(t *testing.T) {
			ckpt := t.TempDir()
			r := spindle(t, repoRoot, submitArgs("--num-executors", strconv.Itoa(tc.ranks),
				"--input", filepath.Join(data, "*.parquet"), "--label-column", "label",
				"--feed", tc.feed, "--batch-rows", "128", "--epochs", "3", "--shuffle", "--seed", "5",
				"--checkpoint-dir", ckpt,
				"--", python, "examples/pytorch/train.py", "--threads", "1")...)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			finals := torchFinal.FindAllStringSubmatch(r.stdout, -1)
			if len(finals) != tc.ranks {
				t.Fatalf("want a final line from each of %d ranks:\n%s", tc.ranks, r)
			}
			for _, f := range finals {
				if acc, _ := strconv.ParseFloat(f[3], 64); acc < 0.8 {
					t.Errorf("rank %s accuracy %.3f, want >= 0.8", f[1], acc)
				}
				if f[4] != finals[0][4] {
					t.Errorf("rank %s parameters %s differ from rank %s's %s", f[1], f[4][:12], finals[0][1], finals[0][4][:12])
				}
			}
			if _, err := os.Stat(filepath.Join(ckpt, "model.pt")); err != nil {
				t.Errorf("rank 0 wrote no checkpoint: %v", err)
			}
		})
	}
}

// TestKilledRankStopsTheJob SIGKILLs one training process mid-training:
// the survivors stop within seconds (not after torch's or the collectives'
// timeouts), the job exits non-zero and names the lost rank and its host.
func TestKilledRankStopsTheJob(t *testing.T) {
	// Not parallel: it looks for training processes left running by command name,
	// which other tests' jobs share.
	t.Run("pytorch", func(t *testing.T) {
		needTorch(t)
		data := generateWith(t, "parquet", 4000, 1, 8)
		killMidTraining(t, "train.py", submitArgs("--num-executors", "3", "--input", filepath.Join(data, "*.parquet"),
			"--label-column", "label", "--feed", "tensor", "--batch-rows", "16", "--epochs", "1000",
			"--", python, "examples/pytorch/train.py", "--threads", "1"))
	})
	t.Run("go-collectives", func(t *testing.T) {
		data := generate(t, "parquet", 4000, 1)
		killMidTraining(t, "logreg", submitArgs("--num-executors", "3", "--input", filepath.Join(data, "*.parquet"),
			"--label-column", "label", "--feed", "tensor", "--batch-rows", "16", "--epochs", "1000",
			"--", logregBin))
	})
}

func killMidTraining(t *testing.T, name string, args []string) {
	t.Helper()
	cmd := exec.Command(spindleBin, args...)
	cmd.Dir, cmd.Env = repoRoot, testEnv()
	var out syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	testutil.WaitFor(t, 90*time.Second, testutil.Holds("every rank to finish an epoch", func() bool {
		return strings.Count(out.String(), "epoch 1") >= 3 || strings.Count(out.String(), "epoch=1") >= 3
	}))

	var victim int
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("the training processes", func() bool {
		procs := descendants(cmd.Process.Pid, name)
		if len(procs) < 3 {
			return false
		}
		victim = procs[1]
		return true
	}))

	killed := time.Now()
	if err := syscall.Kill(victim, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	err := cmd.Wait()
	took := time.Since(killed)
	if err == nil {
		t.Fatalf("job succeeded after a rank was killed:\n%s", out.String())
	}
	if took > 15*time.Second {
		t.Errorf("the job took %s to stop after a rank was killed", took)
	}
	if !regexp.MustCompile(`rank \d \(host 127\.0\.0\.1, executor exec-\d\): training process was killed by signal SIGKILL`).MatchString(out.String()) {
		t.Errorf("the error does not name the killed rank and host:\n%s", out.String())
	}
	if left := descendants(os.Getpid(), name); len(left) > 0 {
		t.Errorf("training processes left running: %v", left)
	}
	t.Logf("job stopped %s after the kill", took.Round(time.Millisecond))
}

// descendants returns the pids below root whose command line mentions name.
func descendants(root int, name string) []int {
	children := map[int][]int{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		s := string(b)
		f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(f) < 2 || f[0] == "Z" {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		children[ppid] = append(children[ppid], pid)
	}
	var out []int
	var walk func(int)
	walk = func(p int) {
		for _, c := range children[p] {
			cmdline, _ := os.ReadFile(filepath.Join("/proc", strconv.Itoa(c), "cmdline"))
			argv := strings.Split(string(cmdline), "\x00")
			if strings.Contains(string(cmdline), name) && filepath.Base(argv[0]) != "spindle" {
				out = append(out, c)
			}
			walk(c)
		}
	}
	walk(root)
	return out
}
