package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// TestReadmeWalkthrough runs the README's standalone walk-through as
// written, with free ports and a temporary directory in place of its own:
// a test HDFS, three masters, two workers, the PyTorch example with a
// checkpoint on HDFS, a failing job and a killed one; status then shows
// SUCCEEDED, FAILED and KILLED.
func TestReadmeWalkthrough(t *testing.T) {
	t.Parallel()
	if _, err := exec.Command("/usr/bin/python3", "-c", "import torch").CombinedOutput(); err != nil {
		t.Skip("python3-torch is not installed (make test installs it)")
	}
	root := testbin.Root()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(readme)
	i, j := strings.Index(text, "<!-- walkthrough:begin -->"), strings.Index(text, "<!-- walkthrough:end -->")
	if i < 0 || j < i {
		t.Fatal("README.md has no walkthrough section")
	}
	script := text[i:j]
	script = script[strings.Index(script, "```sh\n")+len("```sh\n") : strings.LastIndex(script, "```")]

	work := t.TempDir()
	demo := filepath.Join(work, "demo")
	repl := []string{"/tmp/spindle-demo", demo, "examples/pytorch/train.py", filepath.Join(root, "examples/pytorch/train.py")}
	for _, port := range []string{"7077", "7078", "7079", "7001", "7002", "7003", "7081", "7082"} {
		repl = append(repl, "127.0.0.1:"+port, testaddr.Free(t))
	}
	script = strings.NewReplacer(repl...).Replace(script)
	// The binaries are where make build puts them: bin/ under the directory.
	if err := os.MkdirAll(filepath.Join(work, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	for name, bin := range map[string]string{"spindle": spindleBin, "datagen": datagenBin} {
		if err := os.Symlink(bin, filepath.Join(work, "bin", name)); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(4*time.Minute))
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-e", "-c", script+"\nspindle status --master $MASTER --json > status.json\n")
	cmd.Dir = work
	cmd.Env = env()
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// The daemons the script starts run in its process group: stop them all.
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// Daemons left running keep the output pipe open after bash ends.
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.CombinedOutput()
	if cmd.Process != nil {
		stopGroup(cmd.Process.Pid)
	}
	if err != nil {
		var logs strings.Builder
		paths, _ := filepath.Glob(demo + "-*.log")
		for _, p := range paths {
			b, _ := os.ReadFile(p)
			fmt.Fprintf(&logs, "--- %s\n%s\n", filepath.Base(p), tail(string(b), 2000))
		}
		t.Fatalf("the walk-through failed: %v\n%s\n%s", err, out, logs.String())
	}
	var st struct {
		Apps []struct {
			Name    string `json:"name"`
			Outcome string `json:"outcome"`
		} `json:"applications"`
	}
	b, err := os.ReadFile(filepath.Join(work, "status.json"))
	if err != nil || json.Unmarshal(b, &st) != nil {
		t.Fatalf("status.json: %v\n%s", err, b)
	}
	got := map[string]string{}
	for _, a := range st.Apps {
		got[a.Name] = a.Outcome
	}
	if got["good"] != "SUCCEEDED" || got["bad"] != "FAILED" || got["long"] != "KILLED" {
		t.Fatalf("outcomes %v\n%s", got, out)
	}
	if !strings.Contains(string(out), "checkpoint=hdfs:///user/") || !strings.Contains(string(out), "bad failed, as it should") {
		t.Fatalf("the walk-through's output lacks the HDFS checkpoint or the failed job:\n%s", out)
	}
}

func tail(s string, n int) string {
	if len(s) > n {
		return s[len(s)-n:]
	}
	return s
}

// stopGroup stops the daemons of process group pgid as an operator would
// (SIGTERM), waits for them to exit, and kills what is left after a while.
func stopGroup(pgid int) {
	_ = syscall.Kill(-pgid, syscall.SIGTERM)
	deadline := time.Now().Add(30 * time.Second)
	for time.Now().Before(deadline) {
		if err := syscall.Kill(-pgid, 0); err != nil {
			return // no process left in the group
		}
		time.Sleep(100 * time.Millisecond)
	}
	_ = syscall.Kill(-pgid, syscall.SIGKILL)
	time.Sleep(time.Second)
}
