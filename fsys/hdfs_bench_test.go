package fsys

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// BenchmarkHDFSParquet reads every row group of a ~50 MB Parquet file
// through fsys from the test HDFS and, beside it in the same iteration, the
// same file from local disk. It reports both throughputs (of each side's
// fastest iteration, which shared machines disturb least), their ratio,
// and the namenode calls and datanode reads per row group (a split), for
// two block sizes: 1 MiB (row groups span blocks) and 64 MiB.
func BenchmarkHDFSParquet(b *testing.B) {
	local := filepath.Join(b.TempDir(), "bench.parquet")
	rowGroups := writeBenchParquet(b, local, 400_000, 50_000, 16)
	st, _ := os.Stat(local)
	for _, bs := range []int64{1 << 20, 64 << 20} {
		b.Run(fmt.Sprintf("block=%dMiB", bs>>20), func(b *testing.B) {
			c := hdfstest.NewTestCluster(b, hdfstest.Config{BlockSize: bs, Replication: 2})
			conf := b.TempDir()
			if err := c.WriteConfig(conf); err != nil {
				b.Fatal(err)
			}
			res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
			defer res.Close()
			ctx := context.Background()
			hfs, _, err := res.Resolve(ctx, "hdfs:///")
			if err != nil {
				b.Fatal(err)
			}
			upload(b, hfs, local, "/bench.parquet")

			var localTime, hdfsTime fastest
			var nnCalls, dnOps int64
			b.SetBytes(st.Size())
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				readParquet(b, Local(), local, rowGroups)
				localTime.add(time.Since(t0))

				c.ResetStats()
				t0 = time.Now()
				readParquet(b, hfs, "/bench.parquet", rowGroups)
				hdfsTime.add(time.Since(t0))
				s := c.Stats()
				nnCalls += s.NameNodeCallsExcept("renewLease")
				dnOps += s.ReadOps
			}
			b.StopTimer()
			reportRatio(b, st.Size(), localTime, hdfsTime)
			splits := float64(rowGroups * b.N)
			b.ReportMetric(float64(nnCalls)/splits, "nn-calls/split")
			b.ReportMetric(float64(dnOps)/splits, "dn-reads/split")
		})
	}
}

// BenchmarkHDFSRead reads a 64 MiB file in 4 MiB ReadAt calls from the
// test HDFS (one datanode, one block) and from local disk, reporting both
// throughputs (fastest iterations) and their ratio: the raw cost of the HDFS read path (loopback
// TCP, packets, CRC32C checked by the datanode and the client).
func BenchmarkHDFSRead(b *testing.B) {
	const size = 64 << 20
	local := filepath.Join(b.TempDir(), "raw")
	if err := os.WriteFile(local, testData(size, 1), 0o644); err != nil {
		b.Fatal(err)
	}
	c := hdfstest.NewTestCluster(b, hdfstest.Config{BlockSize: size, Replication: 1, DataNodes: 1})
	conf := b.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		b.Fatal(err)
	}
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	hfs, _, err := res.Resolve(context.Background(), "hdfs:///")
	if err != nil {
		b.Fatal(err)
	}
	upload(b, hfs, local, "/raw")
	read := func(fsys FS, name string) time.Duration {
		t0 := time.Now()
		f, err := fsys.Open(context.Background(), name)
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4<<20)
		for off := int64(0); off < size; off += int64(len(buf)) {
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	var localTime, hdfsTime fastest
	b.SetBytes(size)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		localTime.add(read(Local(), local))
		hdfsTime.add(read(hfs, "/raw"))
	}
	b.StopTimer()
	reportRatio(b, size, localTime, hdfsTime)
}

// fastest keeps the shortest of several timings.
type fastest struct{ d time.Duration }

func (f *fastest) add(d time.Duration) {
	if f.d == 0 || d < f.d {
		f.d = d
	}
}

// reportRatio reports the throughput of the fastest local and HDFS reads of
// size bytes and their ratio.
func reportRatio(b *testing.B, size int64, local, hdfs fastest) {
	mb := float64(size) / 1e6
	b.ReportMetric(mb/local.d.Seconds(), "local-MB/s")
	b.ReportMetric(mb/hdfs.d.Seconds(), "hdfs-MB/s")
	b.ReportMetric(local.d.Seconds()/hdfs.d.Seconds(), "hdfs/local")
}

// readParquet opens name on fsys and decodes every row group, as the feed
// reads splits: unbuffered, each column chunk fetched with one ReadAt.
func readParquet(b *testing.B, fsys FS, name string, rowGroups int) {
	ctx := context.Background()
	f, err := fsys.Open(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	props := parquet.NewReaderProperties(memory.DefaultAllocator)
	props.BufferedStreamEnabled = false
	pf, err := file.NewParquetReader(f, file.WithReadProps(props))
	if err != nil {
		b.Fatal(err)
	}
	fr, err := pqarrow.NewFileReader(pf, pqarrow.ArrowReadProperties{BatchSize: 8192}, memory.DefaultAllocator)
	if err != nil {
		b.Fatal(err)
	}
	cols := make([]int, pf.MetaData().Schema.NumColumns())
	for i := range cols {
		cols[i] = i
	}
	var rows int64
	for rg := 0; rg < rowGroups; rg++ {
		tbl, err := fr.ReadRowGroups(ctx, cols, []int{rg})
		if err != nil {
			b.Fatalf("row group %d of %s: %v", rg, name, err)
		}
		rows += tbl.NumRows()
		tbl.Release()
	}
	if rows != pf.NumRows() {
		b.Fatalf("read %d rows of %s, want %d", rows, name, pf.NumRows())
	}
}

// writeBenchParquet writes rows of cols float64 columns, uncompressed,
// in row groups of groupRows, and returns the number of row groups.
func writeBenchParquet(b *testing.B, name string, rows, groupRows, cols int) int {
	fields := make([]arrow.Field, cols)
	for i := range fields {
		fields[i] = arrow.Field{Name: fmt.Sprintf("f%d", i), Type: arrow.PrimitiveTypes.Float64}
	}
	schema := arrow.NewSchema(fields, nil)
	out, err := os.Create(name)
	if err != nil {
		b.Fatal(err)
	}
	defer out.Close()
	props := parquet.NewWriterProperties(
		parquet.WithMaxRowGroupLength(int64(groupRows)),
		parquet.WithDictionaryDefault(false),
		parquet.WithCompression(compress.Codecs.Uncompressed),
	)
	w, err := pqarrow.NewFileWriter(schema, out, props, pqarrow.DefaultWriterProps())
	if err != nil {
		b.Fatal(err)
	}
	rng := rand.New(rand.NewSource(1))
	bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer bld.Release()
	for done := 0; done < rows; done += groupRows {
		for c := 0; c < cols; c++ {
			fb := bld.Field(c).(*array.Float64Builder)
			for r := 0; r < groupRows; r++ {
				fb.Append(rng.Float64())
			}
		}
		rec := bld.NewRecordBatch()
		if err := w.Write(rec); err != nil {
			b.Fatal(err)
		}
		rec.Release()
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	return (rows + groupRows - 1) / groupRows
}

func upload(b *testing.B, fsys FS, local, name string) {
	ctx := context.Background()
	in, err := os.Open(local)
	if err != nil {
		b.Fatal(err)
	}
	defer in.Close()
	af, err := fsys.CreateAtomic(ctx, name)
	if err != nil {
		b.Fatal(err)
	}
	if _, err := io.Copy(af, in); err != nil {
		af.Abort()
		b.Fatal(err)
	}
	if err := af.Commit(); err != nil {
		b.Fatal(err)
	}
}

// BenchmarkHDFSReconnect measures what a namenode connection opened
// again costs a call: a Stat on the open connection (reuse, the
// baseline) against a Stat after the connection sat idle past
// ipc.client.connection.maxidletime (reconnect: dial, handshake and a
// server-defaults call first), as happens after a fresh delegation token
// or a quiet spell.
func BenchmarkHDFSReconnect(b *testing.B) {
	c := hdfstest.NewTestCluster(b, hdfstest.Config{DataNodes: 1})
	conf := b.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		b.Fatal(err)
	}
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	ctx := context.Background()
	hfs, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		b.Fatal(err)
	}
	if err := hfs.MkdirAll(ctx, "/d"); err != nil {
		b.Fatal(err)
	}
	for _, bc := range []struct {
		name    string
		maxIdle time.Duration
	}{{"reuse", time.Hour}, {"reconnect", time.Nanosecond}} {
		b.Run(bc.name, func(b *testing.B) {
			hfs.(*hdfsFS).cluster.maxIdle = bc.maxIdle
			for i := 0; i < b.N; i++ {
				if _, err := hfs.Stat(ctx, "/d"); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
