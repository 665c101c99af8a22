package push

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/testutil"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// TestPushTLS: an endpoint served with a job CA's certificate takes a
// producer that verifies it with the CA and refuses one in plain text or
// one that does not trust the CA; the ranks' splits say grpc+tls, and a
// rank reads its share over TLS with the executors' certificate, but not
// without the job's CA.
func TestPushTLS(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	ca, err := tlsgen.NewJobCA("job-1")
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.ServerConfig([]string{"127.0.0.1"}, tls.VerifyClientCertIfGiven)
	if err != nil {
		t.Fatal(err)
	}
	bundle, _ := ca.ExecutorBundle()
	rank, err := tlsgen.ExecutorConfig(bundle)
	if err != nil {
		t.Fatal(err)
	}
	s := startPush(t, Config{Ranks: 1, BatchRows: 10, EvenBatches: feed.EvenOff, Schema: flightSchema, TLS: server})

	for _, tc := range []struct {
		name  string
		creds credentials.TransportCredentials
		want  string
	}{
		{"plain text", nil, ""},
		{"system roots", credentials.NewTLS(&tls.Config{}), "certificate signed by unknown authority"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var err error
			if tc.creds == nil {
				_, c := dialPush(t, s.Addr())
				_, err = push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, 10), nil)
			} else {
				_, c := dialPushOver(t, s.Addr(), tc.creds)
				_, err = push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 1, 10), nil)
			}
			if status.Code(err) != codes.Unavailable || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("want a refused connection saying %q, got %v", tc.want, err)
			}
		})
	}
	if st := s.Stats(); st.Rows != 0 {
		t.Fatalf("refused producers' rows were taken: %+v", st)
	}

	_, c := dialPushOver(t, s.Addr(), credentials.NewTLS(&tls.Config{RootCAs: ca.Pool()}))
	if _, err := push(ctx, c, testProducerToken, flightSchema, flightBatches(0, 5, 10), nil); err != nil {
		t.Fatal(err)
	}
	if err := endOfInput(ctx, c, testProducerToken); err != nil {
		t.Fatal(err)
	}
	plan, err := s.Plan(ctx, s.Addr(), []string{"id"}, "label")
	if err != nil {
		t.Fatal(err)
	}
	if uri := plan.Ranks[0][0].URI; !strings.HasPrefix(uri, "grpc+tls://") {
		t.Fatalf("rank split %s is not grpc+tls", uri)
	}
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	cfg := feed.PipelineConfig{Splits: plan.Ranks[0], Schema: plan.Schema, Columns: []string{"id"}, LabelColumn: "label",
		BatchRows: 10, EvenBatches: feed.EvenOff, Flight: feed.FlightOptions{PushToken: testFeedToken}}
	// Without the job's CA the rank cannot verify the endpoint (and its
	// stream stays unread: it can still be read once, below).
	if _, err := readPipeline(ctx, res, cfg, 0); err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("a rank without the job's CA: %v", err)
	}
	cfg.Flight.PushTLS = rank
	ids, err := readPipeline(ctx, res, cfg, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ids) != 50 {
		t.Fatalf("the rank read %d rows over TLS, want 50", len(ids))
	}
}
