package push

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"path/filepath"
	"slices"
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

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"

	"github.com/spindle-ml/spindle/fsys"
)

const (
	testProducerToken = "producer-token-for-tests"
	testFeedToken     = "feed-token-for-tests"
)

// startPush serves a push endpoint on loopback until the test ends.
func startPush(t testing.TB, cfg Config) *Server {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ProducerToken, cfg.FeedToken = testProducerToken, testFeedToken
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	s, err := Start(lis, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// dialPush is a producer's own connection to the endpoint.
func dialPush(t testing.TB, addr string) (*grpc.ClientConn, flight.Client) {
	t.Helper()
	return dialPushOver(t, addr, insecure.NewCredentials())
}

// dialPushOver is dialPush over creds.
func dialPushOver(t testing.TB, addr string, creds credentials.TransportCredentials) (*grpc.ClientConn, flight.Client) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, flight.NewClientFromConn(conn, nil)
}

func bearer(ctx context.Context, token string) context.Context {
	return metadata.AppendToOutgoingContext(ctx, "authorization", "Bearer "+token)
}

// push sends recs on one DoPut stream and returns how many batches were
// acknowledged and the stream's outcome. afterAck, when set, is called
// with the count each time an acknowledgement arrives.
func push(ctx context.Context, c flight.Client, token string, sc *arrow.Schema, recs []arrow.RecordBatch, afterAck func(int)) (int, error) {
	return pushAs(ctx, c, token, nil, sc, recs, afterAck)
}

// pushAs is push naming the stream with desc (nil: anonymous).
func pushAs(ctx context.Context, c flight.Client, token string, desc *flight.FlightDescriptor, sc *arrow.Schema, recs []arrow.RecordBatch, afterAck func(int)) (int, error) {
	stream, err := c.DoPut(bearer(ctx, token))
	if err != nil {
		return 0, err
	}
	acks := 0
	done := make(chan error, 1)
	go func() {
		for {
			_, err := stream.Recv()
			if err != nil {
				if errors.Is(err, io.EOF) {
					err = nil
				}
				done <- err
				return
			}
			acks++
			if afterAck != nil {
				afterAck(acks)
			}
		}
	}()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(sc))
	w.SetFlightDescriptor(desc)
	for _, r := range recs {
		if err := w.Write(r); err != nil {
			break // the outcome comes from Recv
		}
	}
	w.Close()
	stream.CloseSend()
	err = <-done
	return acks, err
}

func endOfInput(ctx context.Context, c flight.Client, token string) error {
	return endInput(ctx, c, token, nil)
}

// endInput sends end-of-input with body (a turn's number, in turn mode).
func endInput(ctx context.Context, c flight.Client, token string, body []byte) error {
	stream, err := c.DoAction(bearer(ctx, token), &flight.Action{Type: ActionEndOfInput, Body: body})
	if err != nil {
		return err
	}
	for {
		if _, err := stream.Recv(); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// readRanks reads every rank's share of a push endpoint through the feed
// pipeline, as executors do, and returns the ids each rank got.
func readRanks(ctx context.Context, t testing.TB, s *Server, columns []string, batchRows int) [][]int64 {
	t.Helper()
	return readTurn(ctx, t, s, columns, batchRows, 0)
}

// readTurn is readRanks of turn turn (0: the job's one input), as a warm
// session's executors read it.
func readTurn(ctx context.Context, t testing.TB, s *Server, columns []string, batchRows, turn int) [][]int64 {
	t.Helper()
	plan, err := s.Plan(ctx, s.Addr(), columns, "label")
	if err != nil {
		t.Fatal(err)
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	out := make([][]int64, len(plan.Ranks))
	errs := make([]error, len(plan.Ranks))
	var wg sync.WaitGroup
	for r, splits := range plan.Ranks {
		if turn > 0 {
			splits = slices.Clone(splits)
			for i := range splits {
				splits[i].Ticket = feed.PushTurnTicket(splits[i].Ticket, turn)
			}
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[r], errs[r] = readPipeline(ctx, res, feed.PipelineConfig{Splits: splits, Schema: plan.Schema, Columns: columns, LabelColumn: "label",
				BatchRows: batchRows, EvenBatches: feed.EvenOff, Prefetch: 2, Flight: feed.FlightOptions{PushToken: testFeedToken}}, 0)
		}()
	}
	wg.Wait()
	for r, err := range errs {
		if err != nil {
			t.Fatalf("rank %d: %v", r, err)
		}
	}
	return out
}

// countIDs counts how many times each id was fed, over every rank.
func countIDs(got [][]int64) map[int64]int {
	seen := map[int64]int{}
	for _, ids := range got {
		for _, id := range ids {
			seen[id]++
		}
	}
	return seen
}

// readPipeline reads one epoch and returns the id column, waiting
// perBatch between batches (a slow consumer).
func readPipeline(ctx context.Context, res *fsys.Resolver, cfg feed.PipelineConfig, perBatch time.Duration) ([]int64, error) {
	p, err := feed.NewPipeline(res, cfg)
	if err != nil {
		return nil, err
	}
	defer p.Close()
	rd, err := p.Epoch(ctx, 0)
	if err != nil {
		return nil, err
	}
	defer rd.Close()
	var ids []int64
	for {
		rec, err := rd.Next(ctx)
		if errors.Is(err, io.EOF) {
			return ids, nil
		}
		if err != nil {
			return nil, err
		}
		ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
		rec.Release()
	}
}

// TestPushConcurrentProducers: four producers push at once; every row is
// fed exactly once, dealt in rounds of one batch per rank, and when the
// input ends the rows left are dealt per the even-batches mode.
func TestPushConcurrentProducers(t *testing.T) {
	const producers, batches, rows, ranks, batchRows = 4, 10, 137, 3, 100
	const total = producers * batches * rows // 5480: 18 rounds of 300, 80 left
	for _, tc := range []struct {
		even    feed.EvenMode
		perRank []int64
	}{
		{feed.EvenOff, []int64{1827, 1827, 1826}},
		{feed.EvenPad, []int64{1827, 1827, 1826}}, // 27 or 26 left: the same batch count, no padding
		{feed.EvenDrop, []int64{1800, 1800, 1800}},
	} {
		t.Run(string(tc.even), func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			defer cancel()
			s := startPush(t, Config{Ranks: ranks, BatchRows: batchRows, EvenBatches: tc.even, Schema: flightSchema})
			_, c := dialPush(t, s.Addr())
			var got [][]int64
			var wg sync.WaitGroup
			wg.Add(1)
			go func() {
				defer wg.Done()
				got = readRanks(ctx, t, s, []string{"id"}, 64)
			}()
			var pwg sync.WaitGroup
			errs := make([]error, producers)
			for p := range producers {
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					acks, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(int64(p*batches*rows), batches, rows), nil)
					if err == nil && acks != batches {
						err = fmt.Errorf("%d acknowledgements for %d batches", acks, batches)
					}
					errs[p] = err
				}()
			}
			pwg.Wait()
			for p, err := range errs {
				if err != nil {
					t.Fatalf("producer %d: %v", p, err)
				}
			}
			if err := endOfInput(ctx, c, testProducerToken); err != nil {
				t.Fatal(err)
			}
			wg.Wait()
			seen := map[int64]int{}
			for r, ids := range got {
				if int64(len(ids)) != tc.perRank[r] {
					t.Errorf("rank %d got %d rows, want %d", r, len(ids), tc.perRank[r])
				}
				for _, id := range ids {
					seen[id]++
				}
			}
			for id, n := range seen {
				if n != 1 || id < 0 || id >= total {
					t.Fatalf("row %d fed %d times", id, n)
				}
			}
			if tc.even != feed.EvenDrop && len(seen) != total {
				t.Fatalf("%d distinct rows fed, want %d", len(seen), total)
			}
			st := s.Stats()
			if st.Streams != producers || st.Rows != total || !st.Ended {
				t.Errorf("stats %+v", st)
			}
		})
	}
}

// TestPushPadsShortRanks: when fewer rows are left than there are ranks,
// the ranks left without one get a row of their own again under pad, so
// every rank yields the same number of batches.
func TestPushPadsShortRanks(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	s := startPush(t, Config{Ranks: 3, BatchRows: 10, Schema: flightSchema, Rows: 31})
	_, c := dialPush(t, s.Addr())
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, 31), nil); err != nil {
		t.Fatal(err)
	}
	// The declared row count ended the input: no end-of-input needed.
	got := readRanks(ctx, t, s, []string{"id"}, 10)
	want := [][]int64{
		{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 30},
		{10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 10},
		{20, 21, 22, 23, 24, 25, 26, 27, 28, 29, 20},
	}
	for r := range want {
		if !slices.Equal(got[r], want[r]) {
			t.Errorf("rank %d got %v, want %v", r, got[r], want[r])
		}
	}
}

// TestPushProducerKilled: a producer whose connection is cut mid-stream
// (as when its process is killed) leaves every batch it had acknowledged
// fed exactly once; the job goes on with the other producers' rows.
func TestPushProducerKilled(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	const rows = 100
	s := startPush(t, Config{Ranks: 2, BatchRows: 50, EvenBatches: feed.EvenOff, Schema: flightSchema})
	var got [][]int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = readRanks(ctx, t, s, []string{"id"}, 50)
	}()

	// The victim: ids 0..1999, at most two batches unacknowledged at a
	// time, its connection cut once 5 are acknowledged.
	const window = 2
	acked := pushCut(t, ctx, s.Addr(), nil, flightBatches(0, 20, rows), window, 5)
	// A healthy producer: ids 100000...
	_, c := dialPush(t, s.Addr())
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(100000, 7, rows), nil); err != nil {
		t.Fatal(err)
	}
	if err := endOfInput(ctx, c, testProducerToken); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	seen := map[int64]int{}
	for _, ids := range got {
		for _, id := range ids {
			seen[id]++
		}
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("row %d fed %d times", id, n)
		}
		if !(id >= 0 && id < 2000) && !(id >= 100000 && id < 100700) {
			t.Fatalf("row %d was never sent", id)
		}
	}
	for id := int64(0); id < int64(acked*rows); id++ {
		if seen[id] != 1 {
			t.Fatalf("acknowledged row %d fed %d times", id, seen[id])
		}
	}
	for id := int64(100000); id < 100700; id++ {
		if seen[id] != 1 {
			t.Fatalf("row %d of the healthy producer fed %d times", id, seen[id])
		}
	}
	// Past what it read acknowledged, the victim may have had the
	// batches in flight acknowledged without reading it: those are fed
	// whole, in order (a prefix of its stream), the rest not at all.
	victim := 0
	for id := range seen {
		if id < 2000 {
			victim++
		}
	}
	if victim%rows != 0 || victim < acked*rows || victim > (acked+window)*rows {
		t.Errorf("%d of the killed producer's rows fed; it had read %d acknowledgements of batches of %d", victim, acked, rows)
	}
	for id := int64(0); id < int64(victim); id++ {
		if seen[id] != 1 {
			t.Fatalf("the killed producer's fed rows are not the start of its stream: row %d fed %d times", id, seen[id])
		}
	}
}

// TestPushSlowConsumer: while the ranks do not read, a producer is held
// back once the driver holds its bound; nothing is dropped, and the most
// the driver ever held stays within the bound plus a round and a batch.
func TestPushSlowConsumer(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	const limit, rows, batches = 64 << 10, 1000, 200 // 16 bytes a row: 16 KB batches, 3.2 MB in all
	s := startPush(t, Config{Ranks: 2, BatchRows: 500, EvenBatches: feed.EvenOff, Schema: flightSchema, BufferBytes: limit})
	_, c := dialPush(t, s.Addr())
	pushed := make(chan error, 1)
	go func() {
		_, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, batches, rows), nil)
		if err == nil {
			err = endOfInput(ctx, c, testProducerToken)
		}
		pushed <- err
	}()
	// Nobody reads: the endpoint fills up to its bound and stops there.
	testutil.WaitFor(t, 30*time.Second, func() error {
		if st := s.Stats(); st.BufferedBytes < limit {
			return fmt.Errorf("the endpoint is not full: %+v", st)
		}
		return nil
	})
	const slack = 2*rows*16 + 2*500*16 // a batch being added, a round undealt
	st := s.Stats()
	if st.BufferedBytes > limit+slack || st.Rows*16 > limit+slack {
		t.Fatalf("the endpoint took %d rows and holds %d bytes, bound %d", st.Rows, st.BufferedBytes, limit)
	}
	select {
	case err := <-pushed:
		t.Fatalf("the producer finished while nobody read: %v", err)
	default:
	}
	if st := s.Stats(); st.Producers != 1 {
		t.Fatalf("%d producers connected while one pushes", st.Producers)
	}
	got := readRanks(ctx, t, s, []string{"id"}, 100)
	if err := <-pushed; err != nil {
		t.Fatal(err)
	}
	if n := len(got[0]) + len(got[1]); n != rows*batches {
		t.Fatalf("fed %d rows, want %d", n, rows*batches)
	}
	st = s.Stats()
	if st.PeakBufferedBytes > limit+slack {
		t.Fatalf("the endpoint held up to %d bytes, bound %d (+%d)", st.PeakBufferedBytes, limit, slack)
	}
	// The producer was held back: its wait is counted, and so is all it
	// pushed.
	if st.BackpressureWait <= 0 || st.Batches != batches || st.Bytes < rows*batches*16 || st.Producers != 0 {
		t.Fatalf("stats after a held-back producer: %+v", st)
	}
}

// TestPushRefused: calls without the right token are refused, and so is a
// stream whose schema does not match the job's, naming the column, with
// nothing of it fed.
func TestPushRefused(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	wide := arrow.NewSchema(append(slices.Clone(flightSchema.Fields()), arrow.Field{Name: "extra", Type: arrow.PrimitiveTypes.Int32}), nil)
	wrongType := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "x", Type: arrow.PrimitiveTypes.Float64}, {Name: "label", Type: arrow.PrimitiveTypes.Float32},
	}, nil)
	missing := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}, {Name: "label", Type: arrow.PrimitiveTypes.Float32}}, nil)
	for _, tc := range []struct {
		name   string
		token  string
		schema *arrow.Schema
		code   codes.Code
		want   string
		reason string
	}{
		{"no token", "", flightSchema, codes.Unauthenticated, "producer token", RefusedAuth},
		{"wrong token", "guess", flightSchema, codes.Unauthenticated, "producer token", RefusedAuth},
		{"feed token", testFeedToken, flightSchema, codes.Unauthenticated, "producer token", RefusedAuth},
		{"column of another type", testProducerToken, wrongType, codes.InvalidArgument, `column "x" is float64 in the stream, the job's schema says float32`, RefusedSchema},
		{"column missing", testProducerToken, missing, codes.InvalidArgument, `column "x" (float32) of the job's schema is not in the stream`, RefusedSchema},
		{"column extra", testProducerToken, wide, codes.InvalidArgument, `column "extra" of the stream is not in the job's schema`, RefusedSchema},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startPush(t, Config{Ranks: 1, BatchRows: 10, Schema: flightSchema})
			_, c := dialPush(t, s.Addr())
			recs := []arrow.RecordBatch{emptyBatch(tc.schema, 5)}
			_, err := push(ctx, c, tc.token, tc.schema, recs, nil)
			if status.Code(err) != tc.code || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("got %v, want %s naming %q", err, tc.code, tc.want)
			}
			if st := s.Stats(); st.Rows != 0 || st.Batches != 0 || st.Refused != 1 || st.RefusedBy[tc.reason] != 1 || st.Streams != 0 {
				t.Fatalf("stats after a refusal for %s: %+v", tc.reason, st)
			}
		})
	}

	t.Run("first producer sets the schema", func(t *testing.T) {
		s := startPush(t, Config{Ranks: 1, BatchRows: 10, Required: []string{"x", "label"}})
		_, c := dialPush(t, s.Addr())
		// A schema without the job's columns cannot become the job's.
		if _, err := push(ctx, c, testProducerToken, missing, []arrow.RecordBatch{emptyBatch(missing, 3)}, nil); !strings.Contains(fmt.Sprint(err), `column "x", which the job reads`) {
			t.Fatalf("got %v", err)
		}
		if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, 10), nil); err != nil {
			t.Fatal(err)
		}
		if _, err := push(ctx, c, testProducerToken, wrongType, []arrow.RecordBatch{emptyBatch(wrongType, 3)}, nil); !strings.Contains(fmt.Sprint(err), `column "x" is float64`) {
			t.Fatalf("got %v", err)
		}
		if st := s.Stats(); st.Rows != 10 {
			t.Fatalf("stats %+v", st)
		}
	})

	t.Run("rank stream", func(t *testing.T) {
		s := startPush(t, Config{Ranks: 1, BatchRows: 10, Schema: flightSchema})
		_, c := dialPush(t, s.Addr())
		ticket := &flight.Ticket{Ticket: []byte(feed.PushTicketPrefix + "0")}
		get := func(token string) error {
			stream, err := c.DoGet(bearer(ctx, token), ticket)
			for err == nil {
				_, err = stream.Recv()
			}
			return err
		}
		if err := get(testProducerToken); status.Code(err) != codes.Unauthenticated {
			t.Fatalf("a rank stream read with the producer token: %v", err)
		}
		s.EndInput()
		if err := get(testFeedToken); !errors.Is(err, io.EOF) {
			t.Fatalf("an ended rank stream: %v", err)
		}
		if err := get(testFeedToken); status.Code(err) != codes.FailedPrecondition || !strings.Contains(err.Error(), "fed already") {
			t.Fatalf("a rank stream read twice: %v", err)
		}
		// After the end, pushing is refused.
		if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, 10), nil); status.Code(err) != codes.FailedPrecondition {
			t.Fatalf("a push after the end: %v", err)
		}
		if st := s.Stats(); st.RefusedBy[RefusedEnded] != 1 || st.Producers != 0 {
			t.Fatalf("stats after a push past the end: %+v", st)
		}
	})
}

// TestPushDeclaredRows: a batch that would go past the declared row count
// is refused, whole.
func TestPushDeclaredRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	s := startPush(t, Config{Ranks: 1, BatchRows: 10, Schema: flightSchema, Rows: 25})
	_, c := dialPush(t, s.Addr())
	acks, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 3, 10), nil)
	if acks != 2 || status.Code(err) != codes.OutOfRange || !strings.Contains(err.Error(), "declared 25 rows") {
		t.Fatalf("%d acknowledgements, %v", acks, err)
	}
	if st := s.Stats(); st.Rows != 20 || st.Ended {
		t.Fatalf("stats %+v", st)
	}
}

func TestParsePush(t *testing.T) {
	for _, tc := range []struct{ in, want, err string }{
		{"flight-put:", "", ""},
		{"flight-put://", "", ""},
		{"flight-put://0.0.0.0:8815", "0.0.0.0:8815", ""},
		{"flight-put://:8815", ":8815", ""},
		{"flight-put://etl-gw", "etl-gw:0", ""},
		{"flight-put://h:99999", "", "port"},
		{"flight-put://h:1/path", "", "want flight-put"},
	} {
		got, err := feed.ParseFlightPutURI(tc.in)
		if got != tc.want || (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
			t.Errorf("%s: %q, %v", tc.in, got, err)
		}
	}
	sc, err := ParseSchemaSpec("id:int64, x:float32,label:double")
	if err != nil || sc.NumFields() != 3 || !arrow.TypeEqual(sc.Field(2).Type, arrow.PrimitiveTypes.Float64) {
		t.Fatalf("%v %v", sc, err)
	}
	for spec, want := range map[string]string{"id:int64,id:int32": `"id" appears twice`, "x:complex": `column "x" has unknown type`, "x": "not name:type"} {
		if _, err := ParseSchemaSpec(spec); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v", spec, err)
		}
	}
}

// emptyBatch is n rows of zeros (nulls for strings) with schema sc.
func emptyBatch(sc *arrow.Schema, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	for _, f := range b.Fields() {
		for range n {
			f.AppendEmptyValue()
		}
	}
	return b.NewRecordBatch()
}

// TestPushLargeBatches: batches larger than gRPC's default message bound
// (4 MiB) go through both ways: pushed, and dealt to a rank in batches of
// that size.
func TestPushLargeBatches(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	const rows = 600_000 // 16 bytes a row: 9.6 MB
	s := startPush(t, Config{Ranks: 1, BatchRows: 400_000, EvenBatches: feed.EvenOff, Schema: flightSchema, Rows: rows})
	_, c := dialPush(t, s.Addr())
	var got [][]int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = readRanks(ctx, t, s, []string{"id"}, 400_000)
	}()
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, rows), nil); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	if len(got[0]) != rows || got[0][rows-1] != rows-1 {
		t.Fatalf("fed %d rows", len(got[0]))
	}
}

// TestPushEpochsFromCache: a rank's pushed rows are sent once; later
// epochs come from the executor's cache, in memory or spilled to disk,
// and without room in either an epoch after the first fails saying why.
func TestPushEpochsFromCache(t *testing.T) {
	for _, tc := range []struct {
		name         string
		cache, spill int64
		want         string
	}{
		{"cached", 64 << 20, 0, ""},
		{"spilled", 1 << 10, 64 << 20, ""},
		{"no room", 1 << 10, 0, "fed already"},
		{"no room on disk", 1 << 10, 1 << 10, "spindle.feed.spillDisk"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			defer cancel()
			s := startPush(t, Config{Ranks: 1, BatchRows: 100, EvenBatches: feed.EvenOff, Schema: flightSchema, Rows: 1000})
			_, c := dialPush(t, s.Addr())
			if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 10, 100), nil); err != nil {
				t.Fatal(err)
			}
			plan, err := s.Plan(ctx, s.Addr(), []string{"id"}, "label")
			if err != nil {
				t.Fatal(err)
			}
			res := fsys.NewResolver(fsys.Options{})
			defer res.Close()
			p, err := feed.NewPipeline(res, feed.PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, Columns: []string{"id"}, LabelColumn: "label",
				BatchRows: 100, EvenBatches: feed.EvenOff, CacheBytes: tc.cache, SpillDir: filepath.Join(t.TempDir(), "spill"), SpillBytes: tc.spill,
				Flight: feed.FlightOptions{PushToken: testFeedToken}})
			if err != nil {
				t.Fatal(err)
			}
			defer p.Close()
			for epoch := range 2 {
				rd, err := p.Epoch(ctx, epoch)
				if err != nil {
					t.Fatal(err)
				}
				var n int64
				for {
					rec, err := rd.Next(ctx)
					if errors.Is(err, io.EOF) {
						break
					}
					if err != nil {
						if epoch == 1 && tc.want != "" && strings.Contains(err.Error(), tc.want) {
							rd.Close()
							return
						}
						t.Fatalf("epoch %d: %v", epoch, err)
					}
					n += rec.NumRows()
					rec.Release()
				}
				rd.Close()
				if n != 1000 {
					t.Fatalf("epoch %d fed %d rows", epoch, n)
				}
			}
			if tc.want != "" {
				t.Fatalf("the second epoch worked without a cache")
			}
		})
	}
}

// TestPushProducerResumes: a producer that names its streams (a path
// descriptor) and is cut off mid-stream asks the endpoint how many of its
// rows it took and resumes after them: every row is fed exactly once,
// including those whose acknowledgements it never read. One name has one
// stream open at a time.
func TestPushProducerResumes(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	const rows, total = 100, 2000
	s := startPush(t, Config{Ranks: 2, BatchRows: 50, EvenBatches: feed.EvenOff, Schema: flightSchema})
	var got [][]int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		got = readRanks(ctx, t, s, []string{"id"}, 50)
	}()
	name := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"etl", "part-7"}}
	all := flightBatches(0, total/rows, rows)

	// The first run: cut off once 3 batches are acknowledged, with up to
	// 3 more in flight.
	pushCut(t, ctx, s.Addr(), name, all, 3, 3)
	// The rerun asks where to resume, waiting while the endpoint has not
	// seen the first stream end.
	_, c := dialPush(t, s.Addr())
	var from int64
	testutil.WaitFor(t, 30*time.Second, func() error {
		info, err := c.GetFlightInfo(bearer(ctx, testProducerToken), name)
		if err == nil {
			from = info.GetTotalRecords()
		} else if status.Code(err) != codes.Unavailable {
			t.Fatal(err)
		}
		return err
	})
	if from < 3*rows || from%rows != 0 || from >= total {
		t.Fatalf("resume from row %d", from)
	}
	rest := all[from/rows:]
	// The rerun; while its stream is open, a second stream of the same
	// name is refused.
	stream, err := c.DoPut(bearer(ctx, testProducerToken))
	if err != nil {
		t.Fatal(err)
	}
	w := flight.NewRecordWriter(stream, ipc.WithSchema(flightSchema))
	w.SetFlightDescriptor(name)
	for i, rec := range rest {
		if err := w.Write(rec); err != nil {
			t.Fatal(err)
		}
		if _, err := stream.Recv(); err != nil {
			t.Fatalf("acknowledgement %d: %v", i, err)
		}
		if i == 0 {
			_, err := pushAs(ctx, c, testProducerToken, name, flightSchema, all[:1], nil)
			if status.Code(err) != codes.AlreadyExists || !strings.Contains(err.Error(), `"etl/part-7"`) {
				t.Fatalf("a second stream of the same producer: %v", err)
			}
			if st := s.Stats(); st.RefusedBy[RefusedBusy] != 1 {
				t.Fatalf("a busy producer's stream is not counted refused: %+v", st)
			}
			if named := s.Stats().Named; len(named) != 1 || !named[0].Open || named[0].Streams != 2 {
				t.Fatalf("while the rerun pushes, the producer's stats are %+v, want one open, its second stream", named)
			}
		}
	}
	w.Close()
	stream.CloseSend()
	if _, err := stream.Recv(); !errors.Is(err, io.EOF) {
		t.Fatalf("the rerun's end: %v", err)
	}
	if info, err := c.GetFlightInfo(bearer(ctx, testProducerToken), name); err != nil || info.GetTotalRecords() != total {
		t.Fatalf("after the rerun: %v %v", info.GetTotalRecords(), err)
	}
	want := ProducerStats{Name: "etl/part-7", Rows: total, Batches: total / rows, Streams: 2}
	if named := s.Stats().Named; len(named) != 1 || named[0] != want {
		t.Fatalf("the producer's stats are %+v, want %+v", named, want)
	}
	if err := endOfInput(ctx, c, testProducerToken); err != nil {
		t.Fatal(err)
	}
	wg.Wait()
	seen := map[int64]int{}
	for _, ids := range got {
		for _, id := range ids {
			seen[id]++
		}
	}
	for id := int64(0); id < total; id++ {
		if seen[id] != 1 {
			t.Fatalf("row %d fed %d times", id, seen[id])
		}
	}
	if len(seen) != total {
		t.Fatalf("%d rows fed, want %d", len(seen), total)
	}
}

// pushCut pushes recs on a connection of its own, with at most window
// batches unacknowledged, and cuts the connection (as a killed producer's
// is) once cutAt batches are acknowledged. It returns the
// acknowledgements read.
func pushCut(t *testing.T, ctx context.Context, addr string, desc *flight.FlightDescriptor, recs []arrow.RecordBatch, window, cutAt int) int {
	t.Helper()
	conn, c := dialPush(t, addr)
	stream, err := c.DoPut(bearer(ctx, testProducerToken))
	if err != nil {
		t.Fatal(err)
	}
	acks := make(chan struct{}, len(recs))
	recvDone := make(chan error, 1)
	go func() {
		for {
			if _, err := stream.Recv(); err != nil {
				recvDone <- err
				return
			}
			acks <- struct{}{}
		}
	}()
	w := flight.NewRecordWriter(stream, ipc.WithSchema(flightSchema))
	w.SetFlightDescriptor(desc)
	acked := 0
	for i, rec := range recs {
		for i-acked >= window {
			<-acks
			acked++
		}
		if acked >= cutAt {
			conn.Close() // killed: no end of stream, no goodbye
			break
		}
		if err := w.Write(rec); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	if err := <-recvDone; err == nil || errors.Is(err, io.EOF) {
		t.Fatalf("the cut stream ended cleanly: %v", err)
	}
	return acked
}
