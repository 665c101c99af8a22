package e2e

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// pushJob is a spindle submit of a flight-put: input, running.
type pushJob struct {
	cmd            *exec.Cmd
	stdout, stderr syncbuf.Buffer
	addr, token    string
	done           chan error
}

// startPushJob starts a job whose input producers push to addr, and
// waits for its producers' token file.
func startPushJob(t *testing.T, dir string, extra ...string) *pushJob {
	t.Helper()
	j := &pushJob{addr: testaddr.Free(t), done: make(chan error, 1)}
	tokenFile := filepath.Join(dir, "producer.token")
	args := submitArgs(append([]string{"--input", "flight-put://" + j.addr, "--conf", "spindle.flight.put.tokenFile=" + tokenFile}, extra...)...)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(3*time.Minute))
	t.Cleanup(cancel)
	j.cmd = exec.CommandContext(ctx, spindleBin, args...)
	j.cmd.Dir = dir
	j.cmd.Env = testEnv()
	j.cmd.Stdout, j.cmd.Stderr = &j.stdout, &j.stderr
	if err := j.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { j.done <- j.cmd.Wait() }()
	t.Cleanup(func() {
		if j.cmd.ProcessState == nil {
			j.cmd.Process.Kill()
			<-j.done
		}
	})
	testutil.WaitFor(t, time.Minute, testutil.Holds("the producers' token file", func() bool {
		b, err := os.ReadFile(tokenFile)
		j.token = strings.TrimSpace(string(b))
		return err == nil && j.token != ""
	}))

	return j
}

// wait waits for the job's end and returns how it ended.
func (j *pushJob) wait(t *testing.T) result {
	t.Helper()
	err := <-j.done
	r := result{stdout: j.stdout.String(), stderr: j.stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		r.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return r
}

// pushAll pushes rows [0, n) with one producer, ends the input and
// returns how the job ended.
func (j *pushJob) pushAll(t *testing.T, n int) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	if err := goProducer(ctx, j.addr, j.token, 0, n); err != nil {
		t.Fatal(err)
	}
	if err := endInput(ctx, j.addr, j.token); err != nil {
		t.Fatal(err)
	}
	return j.wait(t)
}

// goProducer pushes rows [first, first+n) (id, x = id, label = id%2) on
// one DoPut stream with token, in batches of 500.
func goProducer(ctx context.Context, addr, token string, first, n int) error {
	return goProducerOver(ctx, insecure.NewCredentials(), addr, token, "", first, n)
}

// goProducerOver is goProducer over creds, naming its stream name (a path
// descriptor) unless name is empty.
func goProducerOver(ctx context.Context, creds credentials.TransportCredentials, addr, token, name string, first, n int) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := flight.NewClientFromConn(conn, nil)
	ctx = metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
	stream, err := c.DoPut(ctx)
	if err != nil {
		return err
	}
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "label", Type: arrow.PrimitiveTypes.Float64},
	}, nil)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	if name != "" {
		w.SetFlightDescriptor(&flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: strings.Split(name, "/")})
	}
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for id := first; id < first+n; id++ {
		b.Field(0).(*array.Int64Builder).Append(int64(id))
		b.Field(1).(*array.Float64Builder).Append(float64(id))
		b.Field(2).(*array.Float64Builder).Append(float64(id % 2))
		if (id-first+1)%500 == 0 || id == first+n-1 {
			rec := b.NewRecordBatch()
			err := w.Write(rec)
			rec.Release()
			if err != nil {
				break // the outcome comes from Recv
			}
		}
	}
	w.Close()
	stream.CloseSend()
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

func endInput(ctx context.Context, addr, token string) error {
	return endInputOver(ctx, insecure.NewCredentials(), addr, token)
}

// endInputOver is endInput over creds.
func endInputOver(ctx context.Context, creds credentials.TransportCredentials, addr, token string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		return err
	}
	defer conn.Close()
	c := flight.NewClientFromConn(conn, nil)
	stream, err := c.DoAction(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token), &flight.Action{Type: "end-of-input"})
	for err == nil {
		_, err = stream.Recv()
	}
	if errors.Is(err, io.EOF) {
		return nil
	}
	return err
}

// checkPushedEpochs checks that every epoch fed rows [0, rows) once over
// the ranks (x = id: their sum is known).
func checkPushedEpochs(t *testing.T, r result, rows, epochs int) {
	t.Helper()
	perEpoch := map[int]float64{}
	got := map[int]int{}
	for _, l := range parseFeedcheck(t, r.stdout) {
		perEpoch[l.epoch] += l.sum
		got[l.epoch] += l.rows
	}
	want := float64(rows) * float64(rows-1) / 2
	for epoch := range epochs {
		if got[epoch] != rows || perEpoch[epoch] != want {
			t.Errorf("epoch %d: %d rows summing to %v, want %d rows summing to %v:\n%s", epoch, got[epoch], perEpoch[epoch], rows, want, r)
		}
	}
}

// TestFlightPutInput: a job fed by ETL producers pushing over Arrow
// Flight: two producers push at once into the endpoint submit announces,
// a producer without the token is refused, end-of-input ends the first
// epoch, and the second comes from the executors' caches. The token
// never reaches the output.
func TestFlightPutInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := startPushJob(t, dir, "--num-executors", "2", "--conf", "spindle.flight.put.schema=id:int64,x:float64,label:float64",
		"--columns", "x", "--label-column", "label", "--feed", "tensor", "--epochs", "2", "--batch-rows", "100", "--", feedcheckBin)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	if err := goProducer(ctx, j.addr, "guess", 0, 10); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a producer with a wrong token: %v", err)
	}
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for p := range 2 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[p] = goProducer(ctx, j.addr, j.token, p*2000, 2000)
		}()
	}
	wg.Wait()
	for p, err := range errs {
		if err != nil {
			t.Fatalf("producer %d: %v", p, err)
		}
	}
	if err := endInput(ctx, j.addr, j.token); err != nil {
		t.Fatal(err)
	}
	r := j.wait(t)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	if !strings.Contains(r.stderr, "pushed input: producers DoPut Arrow record batches to grpc://"+j.addr) {
		t.Errorf("submit does not say where to push:\n%s", r)
	}
	if strings.Contains(r.stdout+r.stderr, j.token) {
		t.Fatalf("the producers' token appears in the output:\n%s", r)
	}
	checkPushedEpochs(t, r, 4000, 2)
	if _, err := os.Stat(filepath.Join(dir, "producer.token")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the token file outlived the job: %v", err)
	}
}

// TestFlightPutShownBeforeTheFirstProducer: a pushed job without a
// declared schema waits for its first producer; meanwhile its web UI is up
// and its page says where to push and where the token is (never the
// token). Then it runs as any other.
func TestFlightPutShownBeforeTheFirstProducer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := startPushJob(t, dir, "--conf", "spindle.ui.port=0", "--columns", "x", "--label-column", "label",
		"--feed", "tensor", "--epochs", "1", "--batch-rows", "100", "--", feedcheckBin)
	var m []string
	testutil.WaitFor(t, time.Minute, testutil.Holds("the job's web UI", func() bool {
		m = uiLine.FindStringSubmatch(j.stderr.String())
		return m != nil
	}))

	jobID, ui := m[1], m[2]
	body := getText(t, ui+"api/jobs/"+jobID)
	var snap jobview.Snapshot
	if err := json.Unmarshal([]byte(body), &snap); err != nil {
		t.Fatalf("the job page's data: %v\n%s", err, body)
	}
	want := jobview.PushInput{Endpoint: "grpc://" + j.addr, TokenFile: filepath.Join(dir, "producer.token")}
	if snap.State != jobview.StateRunning || snap.Push == nil || *snap.Push != want {
		t.Fatalf("before any producer: state %s, push %+v; want running and %+v", snap.State, snap.Push, want)
	}
	if strings.Contains(body, j.token) {
		t.Fatal("the job page shows the producers' token")
	}
	r := j.pushAll(t, 1000)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	checkPushedEpochs(t, r, 1000, 1)
}

// TestFlightPutEpochsFromDisk: a pushed job's later epochs come from the
// executors' disks when their memory cache cannot hold the rows; without
// room on disk either, the second epoch fails saying why.
func TestFlightPutEpochsFromDisk(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, spill string
		code        int
	}{{"spilled", "64m", 0}, {"no room", "0", 1}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			j := startPushJob(t, dir, "--num-executors", "2", "--conf", "spindle.flight.put.schema=id:int64,x:float64,label:float64",
				"--conf", "spindle.feed.cacheMemory=1k", "--conf", "spindle.feed.spillDisk="+tc.spill,
				"--columns", "x", "--label-column", "label", "--feed", "tensor", "--epochs", "3", "--batch-rows", "100", "--", feedcheckBin)
			r := j.pushAll(t, 4000)
			if r.code != tc.code {
				t.Fatalf("exit %d, want %d:\n%s", r.code, tc.code, r)
			}
			if tc.code == 0 {
				checkPushedEpochs(t, r, 4000, 3)
				return
			}
			if !strings.Contains(r.stderr, "fed already") || !strings.Contains(r.stderr, "spindle.feed.spillDisk") {
				t.Errorf("the failed job does not say why:\n%s", r)
			}
		})
	}
}

// TestFlightPutBadInput: mistakes in a flight-put: job are found before
// anything runs, exit 2, naming what is wrong.
func TestFlightPutBadInput(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		args []string
		want string
	}{
		{"bad schema", []string{"--input", "flight-put:", "--conf", "spindle.flight.put.schema=x:complex"}, "spindle.flight.put.schema"},
		{"with files", []string{"--input", "flight-put:", "--input", dir}, "pushed input is the job's only input"},
		{"direct mode", []string{"--input", "flight-put:", "--feed", "direct"}, "--feed arrow or tensor"},
		{"bad address", []string{"--input", "flight-put://h:99999"}, "port"},
		{"elastic policy", []string{"--input", "flight-put:", "--conf", "spindle.failure.policy=elastic"}, "cannot be resized"},
		{"unknown column", []string{"--input", "flight-put:", "--conf", "spindle.flight.put.schema=x:float64", "--label-column", "y"}, `"y"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := spindle(t, dir, submitArgs(append(tc.args, "--", feedcheckBin)...)...)
			if r.code != 2 || !strings.Contains(r.stderr, tc.want) {
				t.Fatalf("want exit 2 naming %q:\n%s", tc.want, r)
			}
		})
	}
}

// TestFlightPutPython: examples/flight-producer.py (pyarrow.flight) pushes
// into a job that declared no schema: the producer's becomes the job's,
// its declared row count ends the input, and the training processes see
// every row once.
func TestFlightPutPython(t *testing.T) {
	t.Parallel()
	py := flightPython(t)
	dir := t.TempDir()
	j := startPushJob(t, dir, "--num-executors", "2", "--conf", "spindle.flight.put.rows=3000",
		"--columns", "x", "--label-column", "label", "--feed", "tensor", "--batch-rows", "64", "--", feedcheckBin)
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	out, err := exec.CommandContext(ctx, py, filepath.Join(repoRoot, "examples", "flight-producer.py"), "--endpoint", "grpc://"+j.addr,
		"--token-file", filepath.Join(dir, "producer.token"), "--rows", "3000", "--batch-rows", "500").CombinedOutput()
	if err != nil || !strings.Contains(string(out), "pushed 3000 rows") {
		t.Fatalf("flight-producer.py: %v\n%s", err, out)
	}
	r := j.wait(t)
	if r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
	checkPushedEpochs(t, r, 3000, 1)
}

// flightPython is the test venv's Python, skipping the test when it does
// not import pyarrow.flight.
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
