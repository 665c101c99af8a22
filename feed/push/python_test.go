package push

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/feed"
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
	p, err := filepath.Abs(filepath.Join("..", "..", "examples", name))
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestFlightPythonProducer: examples/flight-producer.py, a pyarrow.flight
// producer, pushes into a push endpoint with the token from its file, two
// at once, the second ending the input; every row is fed once.
func TestFlightPythonProducer(t *testing.T) {
	py := flightPython(t)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	tokenFile := filepath.Join(t.TempDir(), "token")
	if err := os.WriteFile(tokenFile, []byte(testProducerToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	s := startPush(t, Config{Ranks: 2, BatchRows: 100, EvenBatches: feed.EvenOff})
	var got [][]int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = readRanks(ctx, t, s, []string{"id"}, 100)
	}()
	run := func(args ...string) (string, error) {
		out, err := exec.CommandContext(ctx, py, append([]string{example(t, "flight-producer.py"), "--endpoint", "grpc://" + s.Addr(),
			"--token-file", tokenFile, "--batch-rows", "300"}, args...)...).CombinedOutput()
		return string(out), err
	}
	errs := make([]error, 2)
	var pwg sync.WaitGroup
	for p := range 2 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			out, err := run("--rows", "2500", "--first-id", strconv.Itoa(p*2500))
			if err == nil && !strings.Contains(out, "pushed 2500 rows") {
				err = errors.New("no acknowledgement of 2500 rows")
			}
			if err != nil {
				errs[p] = fmt.Errorf("%w:\n%s", err, out)
			}
		}()
	}
	pwg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("producer %d: %v", p, err)
		}
	}
	if out, err := run("--rows", "0", "--end-of-input"); err != nil || !strings.Contains(out, "the job has 5000 rows") {
		t.Fatalf("end of input: %v\n%s", err, out)
	}
	wg.Wait()
	seen := map[int64]int{}
	for _, ids := range got {
		for _, id := range ids {
			seen[id]++
		}
	}
	for id := int64(0); id < 5000; id++ {
		if seen[id] != 1 {
			t.Fatalf("row %d fed %d times", id, seen[id])
		}
	}
	// A wrong token is refused, naming what is missing.
	bad := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(bad, []byte("guess\n"), 0o600)
	out, err := exec.CommandContext(ctx, py, example(t, "flight-producer.py"), "--endpoint", "grpc://"+s.Addr(), "--token-file", bad, "--rows", "10").CombinedOutput()
	if err == nil || !strings.Contains(string(out), "producer token") {
		t.Fatalf("a wrong token was not refused: %v\n%s", err, out)
	}
}

// TestFlightPythonProducerKilled: a pyarrow.flight producer process killed
// (SIGKILL) mid-stream. Anonymous, every row it had acknowledged is fed
// exactly once, what is fed of its stream is a whole-batch prefix of it,
// at most the batch in flight past its last acknowledgement, and the job
// goes on with another producer's rows. Named (--producer-id), run again
// it resumes where the job's count of its rows says: every row once.
func TestFlightPythonProducerKilled(t *testing.T) {
	py := flightPython(t)
	for _, tc := range []struct {
		name   string
		resume bool
	}{{"anonymous", false}, {"named and run again", true}} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
			defer cancel()
			tokenFile := filepath.Join(t.TempDir(), "token")
			if err := os.WriteFile(tokenFile, []byte(testProducerToken+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			s := startPush(t, Config{Ranks: 2, BatchRows: 100, EvenBatches: feed.EvenOff})
			var got [][]int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				got = readRanks(ctx, t, s, []string{"id"}, 100)
			}()
			producer := func(args ...string) *exec.Cmd {
				return exec.CommandContext(ctx, py, append([]string{example(t, "flight-producer.py"), "--endpoint", "grpc://" + s.Addr(),
					"--token-file", tokenFile, "--batch-rows", "1000"}, args...)...)
			}
			const victimRows = 200_000
			victimArgs := []string{"--rows", strconv.Itoa(victimRows)}
			if tc.resume {
				victimArgs = append(victimArgs, "--producer-id", "etl/part-3")
			}
			victim := producer(append(victimArgs, "--verbose")...)
			out, err := victim.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			if err := victim.Start(); err != nil {
				t.Fatal(err)
			}
			acked, killed := 0, false
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				var n int
				if _, err := fmt.Sscanf(sc.Text(), "flight-producer: acknowledged %d rows", &n); err == nil {
					acked = n
					if n >= 5000 && !killed {
						victim.Process.Kill() // mid-stream, no goodbye
						killed = true
					}
				}
			}
			victim.Wait()
			if acked < 5000 || acked >= victimRows {
				t.Fatalf("the victim acknowledged %d rows", acked)
			}
			if tc.resume {
				out, err := producer(victimArgs...).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "resuming after") {
					t.Fatalf("the rerun: %v\n%s", err, out)
				}
			}
			if out, err := producer("--rows", "3000", "--first-id", "1000000", "--end-of-input").CombinedOutput(); err != nil {
				t.Fatalf("the second producer: %v\n%s", err, out)
			}
			wg.Wait()
			seen := map[int64]int{}
			fed := 0
			for _, ids := range got {
				for _, id := range ids {
					seen[id]++
					if id < victimRows {
						fed++
					}
				}
			}
			for id, n := range seen {
				if n != 1 {
					t.Fatalf("row %d fed %d times", id, n)
				}
			}
			switch {
			case tc.resume && fed != victimRows:
				t.Fatalf("%d of the resumed producer's %d rows fed", fed, victimRows)
			case !tc.resume && (fed%1000 != 0 || fed < acked || fed > acked+1000):
				t.Fatalf("%d of the killed producer's rows fed; it had read acknowledgements of %d", fed, acked)
			}
			for id := int64(0); id < int64(fed); id++ {
				if seen[id] != 1 {
					t.Fatalf("the killed producer's fed rows are not the start of its stream: row %d fed %d times", id, seen[id])
				}
			}
			for id := int64(1000000); id < 1003000; id++ {
				if seen[id] != 1 {
					t.Fatalf("row %d of the second producer fed %d times", id, seen[id])
				}
			}
		})
	}
}
