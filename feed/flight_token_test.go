package feed

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestFlightTokenStaysWithNamedHost: a flight the user names on
// 127.0.0.1, whose endpoints the service places on 127.0.0.2 (another
// host by name), is read there without spindle.flight.token unless
// spindle.flight.tokenHosts names that host; planning (counting an
// unsized flight's rows) and reading both honour it.
func TestFlightTokenStaysWithNamedHost(t *testing.T) {
	endpoints := [][]arrow.RecordBatch{flightBatches(0, 2, 100), flightBatches(200, 1, 50)}
	other := flighttest.StartOn(t, "127.0.0.2", "", map[string]flighttest.Flight{
		"clicks": {Schema: flightSchema, Endpoints: endpoints, Unsized: true},
	})
	named := flighttest.Start(t, "s3cret", map[string]flighttest.Flight{
		"clicks": {Schema: flightSchema, Endpoints: endpoints, Unsized: true, Location: "grpc+tcp://" + other.Addr()},
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	for _, tc := range []struct {
		name      string
		hosts     []string
		wantOther bool
	}{
		{"not allowed", nil, false},
		{"allowed", []string{"127.0.0.2"}, true},
		{"every host", []string{"*"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opts := FlightOptions{Token: "s3cret", TokenHosts: tc.hosts}
			before := other.TokenCalls.Load()
			plan, err := Plan(ctx, res, PlanRequest{Inputs: []string{named.URI("clicks")}, Ranks: 1, Flight: opts})
			if err != nil {
				t.Fatal(err)
			}
			if plan.TotalRows != 250 {
				t.Fatalf("planned %d rows, want 250", plan.TotalRows)
			}
			var rows int64
			for _, s := range plan.Ranks[0] {
				if !strings.Contains(s.URI, other.Addr()) {
					t.Fatalf("split %s is not on the endpoints' host", s.URI)
				}
				rd, err := OpenSplit(ctx, res, s, ReadOptions{Schema: plan.Schema, BatchRows: 64, Flight: opts})
				if err != nil {
					t.Fatal(err)
				}
				for {
					rec, err := rd.Next(ctx)
					if err != nil {
						break
					}
					rows += rec.NumRows()
					rec.Release()
				}
				rd.Close()
			}
			if rows != 250 {
				t.Fatalf("read %d rows, want 250", rows)
			}
			if got := other.TokenCalls.Load() - before; (got > 0) != tc.wantOther {
				t.Fatalf("127.0.0.2 got the token in %d calls; want it: %v", got, tc.wantOther)
			}
		})
	}
	if named.TokenCalls.Load() == 0 {
		t.Fatal("the host the user named never got the token")
	}
}
