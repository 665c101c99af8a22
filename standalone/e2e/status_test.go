package e2e

import (
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
)

// TestStatusOutcomes: spindle status reports how jobs came out, as YARN
// and Spark do (SUCCEEDED, FAILED with the reason), filters by application
// and by running, speaks JSON for scripts, and says at once what is wrong
// with a --master that names no master.
func TestStatusOutcomes(t *testing.T) {
	t.Parallel()
	c := startCluster(t, 2)
	data := generate(t, 1000)
	if code := c.submit(data, jobArgs("good", data, 0)...).wait(t, 2*time.Minute); code != 0 {
		t.Fatalf("good job: exit %d", code)
	}
	bad := c.submit(data, "--name", "bad", "--num-executors", "2", "--executor-cores", "1", "--executor-memory", "512m",
		"--input", data+"/*.parquet", "--", "/bin/sh", "-c", "exit 3")
	if code := bad.wait(t, 2*time.Minute); code != 1 {
		t.Fatalf("bad job: exit %d, want 1", code)
	}

	out, code := spindleCmd(t, "status", "--master", c.masterURL(), "--json")
	if code != 0 {
		t.Fatalf("status --json: exit %d\n%s", code, out)
	}
	var st struct {
		Apps []struct {
			Name    string `json:"name"`
			Outcome string `json:"outcome"`
			Message string `json:"message"`
		} `json:"applications"`
		Workers []map[string]any `json:"workers"`
	}
	if err := json.Unmarshal([]byte(out), &st); err != nil {
		t.Fatalf("status --json is not JSON: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, a := range st.Apps {
		got[a.Name] = a.Outcome
		if a.Name == "bad" && !strings.Contains(a.Message, "status 3") {
			t.Errorf("the failed job's reason %q does not say how its rank exited", a.Message)
		}
	}
	if got["good"] != "SUCCEEDED" || got["bad"] != "FAILED" || len(st.Workers) != 2 {
		t.Fatalf("outcomes %v, %d workers:\n%s", got, len(st.Workers), out)
	}

	out, code = spindleCmd(t, "status", "--master", c.masterURL(), "--app", "bad")
	if code != 0 || !strings.Contains(out, "FAILED") || strings.Contains(out, "good") {
		t.Fatalf("status --app bad: exit %d\n%s", code, out)
	}
	out, code = spindleCmd(t, "status", "--master", c.masterURL(), "--running")
	if code != 0 || strings.Contains(out, "SUCCEEDED") || !strings.Contains(out, "(no applications)") {
		t.Fatalf("status --running: exit %d\n%s", code, out)
	}

	for name, tc := range map[string]struct {
		args []string
		want string
	}{
		"no master": {[]string{"status"}, "spindle status takes a YARN application id"},
		// Without failing fast this would wait out the minute and say so.
		"nothing listens":  {[]string{"status", "--master", "spindle://" + testaddr.Free(t), "--timeout", "1m"}, "no master accepts connections"},
		"a worker's port":  {[]string{"status", "--master", "spindle://" + workerAddr(t, c)}, "is not a Spindle master"},
		"unknown app":      {[]string{"status", "--master", c.masterURL(), "--app", "nope"}, "no application nope"},
		"a stray argument": {[]string{"status", "--master", c.masterURL(), "extra"}, "--app"},
	} {
		t.Run(name, func(t *testing.T) {
			out, code := spindleCmd(t, tc.args...)
			if code == 0 || !strings.Contains(out, tc.want) {
				t.Fatalf("exit %d, want an error saying %q:\n%s", code, tc.want, out)
			}
		})
	}
}

// workerAddr is the address of one of the cluster's workers.
func workerAddr(t *testing.T, c *cluster) string {
	t.Helper()
	st, err := c.status()
	if err != nil {
		t.Fatal(err)
	}
	return st.Cluster.GetWorkers()[0].GetAddr()
}

// TestSubmitToNoMasters: a submit to masters that are not there fails at
// once, naming the addresses it tried, instead of retrying in silence.
func TestSubmitToNoMasters(t *testing.T) {
	t.Parallel()
	data := generate(t, 100)
	addr := testaddr.Free(t)
	out, code := spindleCmd(t, "submit", "--master", "spindle://"+addr, "--conf", "spindle.network.interface=lo",
		"--input", data, "--", "/bin/true")
	if code == 0 || !strings.Contains(out, "no master accepts connections at "+addr) {
		t.Fatalf("exit %d, want a failure naming %s:\n%s", code, addr, out)
	}
}
