package feed

import (
	"context"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/flight"
	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"

	"github.com/spindle-ml/spindle/internal/rpc"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/flighttest"
)

// TestFlightClientsThroughTheChain: the feed's Flight clients are made by
// rpc.NewClient, so their calls are counted and logged like every other
// Spindle client's: here one admitted and one refused.
func TestFlightClientsThroughTheChain(t *testing.T) {
	srv := flighttest.Start(t, "s3cret", map[string]flighttest.Flight{
		"clicks": {Schema: flightSchema, Endpoints: [][]arrow.RecordBatch{flightBatches(0, 1, 10)}},
	})
	reg := prometheus.NewRegistry()
	m, err := rpc.NewMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	desc := &flight.FlightDescriptor{Type: flight.DescriptorPATH, Path: []string{"clicks"}}
	for _, token := range []string{"s3cret", "wrong"} {
		o := FlightOptions{Token: token, calls: rpc.ClientConfig{Metrics: m}}
		c, err := dialFlight(srv.Addr(), false, o)
		if err != nil {
			t.Fatal(err)
		}
		_, err = c.GetFlightInfo(withToken(ctx, o), desc)
		c.Close()
		if (err == nil) != (token == "s3cret") {
			t.Fatalf("token %s: %v", token, err)
		}
	}
	for code, want := range map[codes.Code]float64{codes.OK: 1, codes.Unauthenticated: 1} {
		if n := sent(t, reg, code); n != want {
			t.Errorf("%v calls counted with %v, want %v", n, code, want)
		}
	}
}

// sent sums the client calls reg counted with code.
func sent(t *testing.T, reg *prometheus.Registry, code codes.Code) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	var n float64
	for _, mf := range mfs {
		if mf.GetName() != "spindle_grpc_client_handled_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "code" && l.GetValue() == code.String() {
					n += m.GetCounter().GetValue()
				}
			}
		}
	}
	return n
}
