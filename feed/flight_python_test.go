package feed

import (
	"bufio"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// flightPython returns the test venv's Python when it imports
// pyarrow.flight (make deps installs pyarrow there), and skips the test
// when there is none.
func flightPython(t *testing.T) string {
	t.Helper()
	venv := os.Getenv("SPINDLE_TEST_VENV")
	if venv == "" {
		home, _ := os.UserHomeDir()
		venv = filepath.Join(home, ".cache", "spindle-test-venv")
	}
	py := filepath.Join(venv, "bin", "python")
	if out, err := exec.Command(py, "-c", "import pyarrow.flight").CombinedOutput(); err != nil {
		t.Skipf("skipping: the test venv's Python (%s) does not import pyarrow.flight (make deps installs it): %v %s", py, err, out)
	}
	return py
}

// example is the path of a script in examples/.
func example(t *testing.T, name string) string {
	t.Helper()
	p, err := filepath.Abs(filepath.Join("..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// startPythonFlightServer runs examples/flight-server.py until the test
// ends and returns the input naming its flight.
func startPythonFlightServer(t *testing.T, py string, args ...string) string {
	t.Helper()
	cmd := exec.Command(py, append([]string{example(t, "flight-server.py")}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	t.Cleanup(func() {
		cmd.Process.Kill()
		<-done
	})
	lines := make(chan string, 1)
	go func() {
		defer close(done)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if uri, ok := strings.CutPrefix(sc.Text(), "flight-server: serving "); ok {
				lines <- uri
			}
		}
		cmd.Wait()
		close(lines)
	}()
	select {
	case uri, ok := <-lines:
		if !ok {
			t.Fatalf("flight-server.py ended without serving:\n%s", stderr.String())
		}
		return uri
	case <-time.After(time.Minute):
		t.Fatalf("flight-server.py did not start in a minute:\n%s", stderr.String())
	}
	return ""
}

// TestFlightPythonServer: Spindle pulls from a third-party Flight server,
// pyarrow.flight's: the ranks read every row once, whether the flight says
// its size or not, and a wrong token is bad input naming the key.
func TestFlightPythonServer(t *testing.T) {
	py := flightPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	for _, tc := range []struct {
		name  string
		extra []string
	}{{"sized", nil}, {"unsized", []string{"--unsized"}}} {
		t.Run(tc.name, func(t *testing.T) {
			uri := startPythonFlightServer(t, py, append([]string{"--rows", "5000", "--endpoints", "3", "--batch-rows", "700", "--token", "py-token"}, tc.extra...)...)
			opts := FlightOptions{Token: "py-token"}
			plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{uri}, Ranks: 2, Columns: []string{"id"}, LabelColumn: "label", Flight: opts})
			if err != nil {
				t.Fatal(err)
			}
			if plan.TotalRows != 5000 || len(plan.Files) != 3 {
				t.Fatalf("plan: %d rows, %d endpoints", plan.TotalRows, len(plan.Files))
			}
			seen := map[int64]int{}
			for r := range plan.Ranks {
				ids, err := readPipeline(ctx, res, PipelineConfig{Splits: plan.Ranks[r], Schema: plan.Schema, Columns: []string{"id"}, LabelColumn: "label",
					BatchRows: 128, EvenBatches: EvenOff, Prefetch: 2, Flight: opts})
				if err != nil {
					t.Fatalf("rank %d: %v", r, err)
				}
				if int64(len(ids)) != plan.RowsPerRank[r] {
					t.Errorf("rank %d read %d rows, planned %d", r, len(ids), plan.RowsPerRank[r])
				}
				for _, id := range ids {
					seen[id]++
				}
			}
			for id := int64(0); id < 5000; id++ {
				if seen[id] != 1 {
					t.Fatalf("row %d read %d times", id, seen[id])
				}
			}
			_, err = Plan(ctx, res, PlanRequest{Inputs: []string{uri}, Ranks: 2, Flight: FlightOptions{Token: "guess"}})
			if !errors.Is(err, ErrInput) || !strings.Contains(err.Error(), "spindle.flight.token") {
				t.Fatalf("a wrong token: %v", err)
			}
		})
	}
}
