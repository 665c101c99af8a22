package push

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"path/filepath"
	"sync"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spindle-ml/spindle/feed"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/tlsgen"

	"github.com/spindle-ml/spindle/feed/plan"
)

// discardServer takes DoPut streams and drops their batches: what Flight
// itself costs, the ceiling of pushed input.
type discardServer struct {
	flight.BaseFlightServer
}

func (*discardServer) DoPut(stream flight.FlightService_DoPutServer) error {
	rd, err := flight.NewRecordReader(stream, ipc.WithAllocator(memory.DefaultAllocator))
	if err != nil {
		return err
	}
	defer rd.Release()
	for rd.Next() {
	}
	return rd.Err()
}

// BenchmarkFlightPush feeds one rank 2M rows (an id, a float64 and a
// label) three ways in one run: a raw Flight DoPut into a server that
// drops the batches (the ceiling), the same batches pushed into a push
// endpoint and read by the rank through the feed pipeline (DoPut, deal,
// DoGet, pipeline), and the same rows from a local Parquet file through
// the pipeline; the push both in plain text and over the job's TLS. It
// reports rows/s.
func BenchmarkFlightPush(b *testing.B) {
	const rows, batch = 2 << 20, 64 << 10
	sc := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "x", Type: arrow.PrimitiveTypes.Float64},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	var recs []arrow.RecordBatch
	for off := int64(0); off < rows; off += batch {
		recs = append(recs, testRecord(sc, off, batch))
	}
	pq := writeParquet(b, filepath.Join(b.TempDir(), "bench.parquet"), sc, 0, rows, batch)
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()

	b.Run("raw-doput", func(b *testing.B) {
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		srv := grpc.NewServer()
		flight.RegisterFlightServiceServer(srv, &discardServer{})
		go srv.Serve(lis)
		defer srv.Stop()
		_, c := dialPush(b, lis.Addr().String())
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if _, err := push(ctx, c, "", sc, recs, nil); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	pushFeed := func(b *testing.B, jobTLS bool) {
		var server, rank *tls.Config
		producer := insecure.NewCredentials()
		if jobTLS {
			ca, err := tlsgen.NewJobCA("bench")
			if err != nil {
				b.Fatal(err)
			}
			if server, err = ca.ServerConfig([]string{"127.0.0.1"}, tls.VerifyClientCertIfGiven); err != nil {
				b.Fatal(err)
			}
			bundle, err := ca.ExecutorBundle()
			if err != nil {
				b.Fatal(err)
			}
			if rank, err = tlsgen.ExecutorConfig(bundle); err != nil {
				b.Fatal(err)
			}
			producer = credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()})
		}
		for i := 0; i < b.N; i++ {
			s := startPush(b, Config{Ranks: 1, BatchRows: 4096, EvenBatches: feed.EvenOff, Schema: sc, TLS: server})
			_, c := dialPushOver(b, s.Addr(), producer)
			var wg sync.WaitGroup
			var perr error
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, perr = push(ctx, c, testProducerToken, sc, recs, nil); perr == nil {
					perr = endOfInput(ctx, c, testProducerToken)
				}
			}()
			jp, err := s.Plan(ctx, s.Addr(), nil, "label")
			if err != nil {
				b.Fatal(err)
			}
			n := feedAll(b, res, feed.PipelineConfig{Splits: jp.Ranks[0], Schema: jp.Schema, LabelColumn: "label", BatchRows: 4096,
				EvenBatches: feed.EvenOff, Flight: feed.FlightOptions{PushToken: testFeedToken, PushTLS: rank}})
			wg.Wait()
			if perr != nil {
				b.Fatal(perr)
			}
			if n != rows {
				b.Fatalf("fed %d rows, want %d", n, rows)
			}
			s.Close()
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	}
	b.Run("push-feed", func(b *testing.B) { pushFeed(b, false) })
	// The same over the job's TLS (spindle.job.tls.enabled): the producer
	// verifies the endpoint, the rank presents the executors' certificate.
	b.Run("push-feed-tls", func(b *testing.B) { pushFeed(b, true) })
	b.Run("parquet-feed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			jp, err := plan.Plan(ctx, res, feed.PlanRequest{Inputs: []string{pq}, Ranks: 1, LabelColumn: "label"})
			if err != nil {
				b.Fatal(err)
			}
			if n := feedAll(b, res, feed.PipelineConfig{Splits: jp.Ranks[0], Schema: jp.Schema, LabelColumn: "label", BatchRows: 4096}); n != rows {
				b.Fatalf("fed %d rows, want %d", n, rows)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
}

// feedAll reads one epoch of a pipeline and returns its rows.
func feedAll(b *testing.B, res *fsys.Resolver, cfg feed.PipelineConfig) int64 {
	ctx := context.Background()
	p, err := feed.NewPipeline(res, cfg)
	if err != nil {
		b.Fatal(err)
	}
	defer p.Close()
	rd, err := p.Epoch(ctx, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer rd.Close()
	var n int64
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return n
		}
		if err != nil {
			b.Fatal(err)
		}
		n += rec.NumRows()
		rec.Release()
	}
}
