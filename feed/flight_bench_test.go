package feed

import (
	"context"
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// BenchmarkFlight feeds one rank 2M rows (an id, a float64 and a label)
// three ways in one run: a raw Flight DoGet that drops the batches (the
// ceiling), the same flight through the feed pipeline, and the same rows
// from a local Parquet file through the pipeline; then epochs after the
// first, from the executor's memory cache and from its disk. It reports
// rows/s; the ratios are what Flight ingestion costs over its ceiling and
// over files, and what a later epoch costs from disk rather than memory.
func BenchmarkFlight(b *testing.B) {
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
	srv := flighttest.Start(b, "", map[string]flighttest.Flight{"bench": {Schema: sc, Endpoints: [][]arrow.RecordBatch{recs}}})
	pq := writeParquet(b, filepath.Join(b.TempDir(), "bench.parquet"), sc, 0, rows, batch)
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()

	feedRows := func(b *testing.B, input string, cfg PipelineConfig) {
		cfg.BatchRows = 4096
		p := plannedPipeline(b, res, input, cfg)
		defer p.Close()
		rd, err := p.Epoch(ctx, 0)
		if err != nil {
			b.Fatal(err)
		}
		var n int64
		for {
			rec, err := rd.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n += rec.NumRows()
			rec.Release()
		}
		rd.Close()
		if n != rows {
			b.Fatalf("fed %d rows, want %d", n, rows)
		}
	}
	b.Run("raw-doget", func(b *testing.B) {
		conn, err := grpc.NewClient(srv.Addr(), grpc.WithTransportCredentials(insecure.NewCredentials()))
		if err != nil {
			b.Fatal(err)
		}
		defer conn.Close()
		c := flight.NewClientFromConn(conn, nil)
		for i := 0; i < b.N; i++ {
			info, err := c.GetFlightInfo(ctx, &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"bench"}})
			if err != nil {
				b.Fatal(err)
			}
			stream, err := c.DoGet(ctx, info.GetEndpoint()[0].GetTicket())
			if err != nil {
				b.Fatal(err)
			}
			rd, err := flight.NewRecordReader(stream, ipc.WithAllocator(memory.DefaultAllocator))
			if err != nil {
				b.Fatal(err)
			}
			var n int64
			for rd.Next() {
				n += rd.RecordBatch().NumRows()
			}
			rd.Release()
			if n != rows {
				b.Fatalf("read %d rows", n)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("flight-feed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			feedRows(b, srv.URI("bench"), PipelineConfig{})
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// The first epoch writing what outgrows a small memory cache to disk.
	b.Run("flight-feed-spilling", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			feedRows(b, srv.URI("bench"), PipelineConfig{CacheBytes: 1 << 10, SpillDir: filepath.Join(b.TempDir(), "spill"), SpillBytes: 1 << 30})
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	b.Run("parquet-feed", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			feedRows(b, pq, PipelineConfig{})
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
	})
	// Epochs after the first: from the executor's memory cache, and from
	// its disk when the memory cache is too small (spindle.feed.spillDisk).
	laterEpochs := func(b *testing.B, cfg PipelineConfig) {
		cfg.BatchRows = 4096
		p := plannedPipeline(b, res, srv.URI("bench"), cfg)
		defer p.Close()
		if n := epochRows(b, p, 0); n != rows { // fills the cache
			b.Fatalf("fed %d rows, want %d", n, rows)
		}
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if n := epochRows(b, p, 1+i); n != rows {
				b.Fatalf("fed %d rows, want %d", n, rows)
			}
		}
		b.ReportMetric(float64(rows)*float64(b.N)/b.Elapsed().Seconds(), "rows/s")
		if st := p.Stats(); st.CacheHits == 0 {
			b.Fatalf("later epochs did not come from the cache: %+v", st)
		}
	}
	b.Run("flight-later-epochs-memory", func(b *testing.B) {
		laterEpochs(b, PipelineConfig{CacheBytes: 1 << 30})
	})
	b.Run("flight-later-epochs-disk", func(b *testing.B) {
		laterEpochs(b, PipelineConfig{CacheBytes: 1 << 10, SpillDir: filepath.Join(b.TempDir(), "spill"), SpillBytes: 1 << 30})
	})
}

// BenchmarkPlanFlightEndpoints plans a flight of 1,000 endpoints of 1,000
// rows each, whose FlightInfo gives no per-endpoint counts, for 2 ranks:
// what the driver spends before training starts. "counted" reads every
// endpoint to count its rows (what an elastic job still needs); "dealt"
// deals whole endpoints unread (PlanRequest.DealEndpoints, every other
// job). It reports the DoGet calls made per plan (dgets/op).
func BenchmarkPlanFlightEndpoints(b *testing.B) {
	const endpoints, rows = 1000, 1000
	eps := make([][]arrow.RecordBatch, endpoints)
	for i := range eps {
		eps[i] = flightBatches(int64(i*rows), 1, rows)
	}
	srv := flighttest.Start(b, "", map[string]flighttest.Flight{"wide": {Schema: flightSchema, Endpoints: eps}})
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	for _, dealt := range []bool{false, true} {
		name := "counted"
		if dealt {
			name = "dealt"
		}
		b.Run(name, func(b *testing.B) {
			before := srv.Gets.Load()
			for range b.N {
				plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{srv.URI("wide")}, Ranks: 2, DealEndpoints: dealt})
				if err != nil {
					b.Fatal(err)
				}
				if n := len(plan.Ranks[0]) + len(plan.Ranks[1]); n != endpoints {
					b.Fatalf("planned %d endpoints, want %d", n, endpoints)
				}
			}
			b.ReportMetric(float64(srv.Gets.Load()-before)/float64(b.N), "dgets/op")
		})
	}
}
