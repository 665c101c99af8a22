package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"github.com/spindle-ml/spindle/internal/testutil"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
)

// TestFlightPutTLS: with spindle.job.tls.enabled the push endpoint serves
// TLS with a certificate of the job's CA, whose certificate submit writes
// beside the token file and names; producers that verify it with that
// file push (arrow-go's Flight client, and examples/flight-producer.py
// with pyarrow.flight), the ranks read their shares over TLS with the
// executors' certificate, and every row is fed once. A plain-text
// producer, and one that does not trust the job's CA, are refused in the
// handshake.
func TestFlightPutTLS(t *testing.T) {
	t.Parallel()
	for _, producer := range []string{"go", "python"} {
		t.Run(producer, func(t *testing.T) {
			var py string
			if producer == "python" {
				py = flightPython(t)
			}
			dir := t.TempDir()
			j := startPushJob(t, dir, "--num-executors", "2", "--conf", "spindle.job.tls.enabled=true",
				"--conf", "spindle.flight.put.rows=3000", "--conf", "spindle.flight.put.schema=id:int64,x:float64,label:float64",
				"--columns", "x", "--label-column", "label", "--feed", "tensor", "--batch-rows", "64", "--", feedcheckBin)
			caFile := filepath.Join(dir, "producer.ca.pem")
			fi, err := os.Stat(caFile)
			if err != nil {
				t.Fatalf("no CA file beside the token file: %v\n%s", err, j.stderr.String())
			}
			if fi.Mode().Perm() != 0o644 {
				t.Errorf("CA file mode %v, want 0644 (a public certificate)", fi.Mode().Perm())
			}
			caPEM, _ := os.ReadFile(caFile)
			roots := x509.NewCertPool()
			if !roots.AppendCertsFromPEM(caPEM) {
				t.Fatalf("%s holds no certificate", caFile)
			}
			testutil.WaitFor(t, 30*time.Second, testutil.Holds("submit's word on where to push", func() bool {
				return strings.Contains(j.stderr.String(), "pushed input: producers DoPut Arrow record batches to grpc+tls://"+j.addr+
					", verifying its certificate with the job's CA in "+caFile)
			}))

			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
			defer cancel()
			if err := goProducer(ctx, j.addr, j.token, 0, 10); status.Code(err) != codes.Unavailable {
				t.Errorf("a plain-text producer: want a refused connection (Unavailable), got %v", err)
			}
			if err := goProducerOver(ctx, credentials.NewTLS(&tls.Config{}), j.addr, j.token, "", 0, 10); err == nil ||
				!strings.Contains(err.Error(), "certificate signed by unknown authority") {
				t.Errorf("a producer that does not trust the job's CA: %v", err)
			}
			if producer == "go" {
				if err := goProducerOver(ctx, credentials.NewTLS(&tls.Config{RootCAs: roots}), j.addr, j.token, "", 0, 3000); err != nil {
					t.Fatalf("producer over TLS: %v", err)
				}
			} else {
				out, err := exec.CommandContext(ctx, py, filepath.Join(repoRoot, "examples", "flight-producer.py"), "--endpoint", "grpc+tls://"+j.addr,
					"--ca-file", caFile, "--token-file", filepath.Join(dir, "producer.token"), "--rows", "3000", "--batch-rows", "500").CombinedOutput()
				if err != nil || !strings.Contains(string(out), "pushed 3000 rows") {
					t.Fatalf("flight-producer.py over TLS: %v\n%s", err, out)
				}
			}
			r := j.wait(t)
			if r.code != 0 {
				t.Fatalf("job failed:\n%s", r)
			}
			checkPushedEpochs(t, r, 3000, 1)
			if _, err := os.Stat(caFile); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the CA file outlived the job: %v", err)
			}
		})
	}
}

// TestFlightPutMetrics: the driver's /metrics shows what producers pushed
// (rows, batches, bytes), in all and from a producer that names its
// stream, the producers connected and the streams refused by reason, read
// from a running job.
func TestFlightPutMetrics(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	j := startPushJob(t, dir, "--num-executors", "2", "--conf", "spindle.ui.port=0",
		"--conf", "spindle.flight.put.schema=id:int64,x:float64,label:float64",
		"--columns", "x", "--label-column", "label", "--feed", "tensor", "--batch-rows", "100", "--", feedcheckBin)
	var ui string
	testutil.WaitFor(t, 60*time.Second, testutil.Holds("the web UI's address", func() bool {
		m := uiLine.FindStringSubmatch(j.stderr.String())
		if m != nil {
			ui = m[2]
		}
		return m != nil
	}))

	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(2*time.Minute))
	defer cancel()
	if err := goProducer(ctx, j.addr, "guess", 0, 10); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a producer with a wrong token: %v", err)
	}
	if err := otherSchemaProducer(ctx, j.addr, j.token); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("a producer of another schema: %v", err)
	}
	if err := goProducer(ctx, j.addr, j.token, 0, 2000); err != nil {
		t.Fatal(err)
	}
	if err := goProducerOver(ctx, insecure.NewCredentials(), j.addr, j.token, "etl/part-1", 2000, 1000); err != nil {
		t.Fatal(err)
	}
	fams := scrapeDriver(t, ui+"metrics")
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"spindle_push_rows_total", nil, 3000},
		{"spindle_push_batches_total", nil, 6}, // goProducer sends 500 rows a batch
		{"spindle_push_producer_rows_total", map[string]string{"producer": "etl/part-1"}, 1000},
		{"spindle_push_producer_batches_total", map[string]string{"producer": "etl/part-1"}, 2},
		{"spindle_push_producer_streams_open", map[string]string{"producer": "etl/part-1"}, 0},
		{"spindle_push_producers", nil, 0},
		{"spindle_push_refused_streams_total", map[string]string{"reason": "auth"}, 1},
		{"spindle_push_refused_streams_total", map[string]string{"reason": "schema"}, 1},
		{"spindle_push_refused_streams_total", map[string]string{"reason": "busy"}, 0},
	} {
		if got, ok := metricValue(fams, c.name, c.labels); !ok || got != c.want {
			t.Errorf("%s%v = %v (found %v), want %v", c.name, c.labels, got, ok, c.want)
		}
	}
	// Three float64 or int64 columns of 8 bytes a row.
	if got, _ := metricValue(fams, "spindle_push_bytes_total", nil); got < 3000*24 {
		t.Errorf("spindle_push_bytes_total = %v, want at least %d", got, 3000*24)
	}
	if _, ok := metricValue(fams, "spindle_push_backpressure_wait_seconds_total", nil); !ok {
		t.Error("no spindle_push_backpressure_wait_seconds_total")
	}
	if err := endInput(ctx, j.addr, j.token); err != nil {
		t.Fatal(err)
	}
	if r := j.wait(t); r.code != 0 {
		t.Fatalf("job failed:\n%s", r)
	}
}

// otherSchemaProducer pushes one batch of a schema no job here declares.
func otherSchemaProducer(ctx context.Context, addr, token string) error {
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		return err
	}
	defer conn.Close()
	stream, err := flight.NewClientFromConn(conn, nil).DoPut(metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token))
	if err != nil {
		return err
	}
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Int32}}, nil)
	b := array.NewInt32Builder(memory.DefaultAllocator)
	b.AppendValues([]int32{1, 2, 3}, nil)
	col := b.NewArray()
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, 3)
	w := flight.NewRecordWriter(stream, ipc.WithSchema(schema))
	_ = w.Write(rec)
	rec.Release()
	col.Release()
	b.Release()
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

// scrapeDriver reads a driver's /metrics as Prometheus would.
func scrapeDriver(t *testing.T, url string) map[string]*dto.MetricFamily {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("%s is not Prometheus text: %v", url, err)
	}
	return fams
}

// metricValue is the value of a counter or gauge's series with labels.
func metricValue(fams map[string]*dto.MetricFamily, name string, labels map[string]string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		for _, lp := range m.GetLabel() {
			if want, ok := labels[lp.GetName()]; ok && want != lp.GetValue() {
				continue next
			}
		}
		if f.GetType() == dto.MetricType_COUNTER {
			return m.GetCounter().GetValue(), true
		}
		return m.GetGauge().GetValue(), true
	}
	return 0, false
}
