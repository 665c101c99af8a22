package push

import (
	"context"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/flight"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/testutil"
)

// endTurn ends turn n's input.
func endTurn(ctx context.Context, c flight.Client, n int) error {
	return endInput(ctx, c, testProducerToken, []byte(strconv.Itoa(n)))
}

// TestPushTurns: a warm session's endpoint keeps each job's rows to its
// own turn. Two turns pushed by named producers reach the ranks each
// exactly once, turn 2's ranks see none of turn 1's rows, a producer
// counts its rows per turn, and once every rank has gone on to turn 2,
// turn 1 takes no more rows.
func TestPushTurns(t *testing.T) {
	const ranks, batches, rows, batchRows = 2, 6, 50, 32
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	s := startPush(t, Config{Ranks: ranks, BatchRows: batchRows, Schema: flightSchema, Turns: true})
	_, c := dialPush(t, s.Addr())
	first := map[int]int64{1: 0, 2: 100000}
	for _, n := range []int{1, 2} {
		var got [][]int64
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			got = readTurn(ctx, t, s, []string{"id"}, batchRows, n)
		}()
		for p := range 2 {
			desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"turn", strconv.Itoa(n), "spark", "part-" + strconv.Itoa(p)}}
			ids := flightBatches(first[n]+int64(p*batches*rows), batches, rows)
			if acks, err := pushAs(ctx, c, testProducerToken, desc, flightSchema, ids, nil); err != nil || acks != batches {
				t.Fatalf("turn %d, producer %d: %d acknowledgements, %v", n, p, acks, err)
			}
			info, err := c.GetFlightInfo(bearer(ctx, testProducerToken), desc)
			if err != nil || info.GetTotalRecords() != batches*rows {
				t.Fatalf("turn %d, producer %d: GetFlightInfo says %d rows (%v), want %d", n, p, info.GetTotalRecords(), err, batches*rows)
			}
		}
		if err := endTurn(ctx, c, n); err != nil {
			t.Fatal(err)
		}
		wg.Wait()
		seen := countIDs(got)
		for id, k := range seen {
			if k != 1 || id < first[n] || id >= first[n]+2*batches*rows {
				t.Fatalf("turn %d: row %d fed %d times (its rows are %d to %d)", n, id, k, first[n], first[n]+2*batches*rows-1)
			}
		}
		if len(seen) != 2*batches*rows {
			t.Fatalf("turn %d: %d distinct rows fed, want %d", n, len(seen), 2*batches*rows)
		}
	}
	late := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"turn", "1", "late"}}
	if _, err := pushAs(ctx, c, testProducerToken, late, flightSchema, flightBatches(0, 1, rows), nil); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("a push into turn 1 after every rank went on to turn 2: %v, want FailedPrecondition", err)
	}
	if st := s.Stats(); st.Rows != 2*2*batches*rows || len(st.Named) != 2 {
		t.Fatalf("stats: %d rows, %d named producers; want %d rows over both turns and turn 2's 2 producers", st.Rows, len(st.Named), 2*2*batches*rows)
	}
}

// TestPushTurnsRefuseUnturned: in turn mode a stream or an end-of-input
// that names no turn is refused, saying how to name one.
func TestPushTurnsRefuseUnturned(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	s := startPush(t, Config{Ranks: 2, BatchRows: 8, Schema: flightSchema, Turns: true})
	_, c := dialPush(t, s.Addr())
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, 8), nil); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("an anonymous stream: %v, want InvalidArgument", err)
	}
	if err := endOfInput(ctx, c, testProducerToken); status.Code(err) != codes.InvalidArgument {
		t.Fatalf("end-of-input without a turn: %v, want InvalidArgument", err)
	}
	if st := s.Stats(); st.Rows != 0 {
		t.Fatalf("%d rows taken, want none", st.Rows)
	}
}
