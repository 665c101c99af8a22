package rpc

import (
	"context"
	"log/slog"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
)

// Metrics counts a process's gRPC calls, as a server or a client, by
// method and code. Register it once on the registry the process serves
// (it is passed in, never global).
type Metrics struct {
	handled *prometheus.CounterVec
	sent    *prometheus.CounterVec
}

// NewMetrics returns Metrics registered on reg.
func NewMetrics(reg prometheus.Registerer) (*Metrics, error) {
	m := &Metrics{
		handled: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spindle_grpc_server_handled_total",
			Help: "gRPC calls this process served, by method and code.",
		}, []string{"method", "code"}),
		sent: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "spindle_grpc_client_handled_total",
			Help: "gRPC calls this process made, by method and code.",
		}, []string{"method", "code"}),
	}
	for _, c := range []prometheus.Collector{m.handled, m.sent} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return m, nil
}

// observer counts and logs the outcome of calls: a failure is logged with
// the method, the code, how long the call took and the peer's address;
// never a request, a response or the call's metadata, where tokens
// travel.
type observer struct {
	log     *slog.Logger
	metrics *Metrics
	client  bool
}

// start begins a call of method and returns what to call with its error
// when it ends.
func (o observer) start(ctx context.Context, method string) func(error) {
	began := time.Now()
	return func(err error) {
		code := status.Code(err)
		if o.metrics != nil {
			vec := o.metrics.handled
			if o.client {
				vec = o.metrics.sent
			}
			vec.WithLabelValues(method, code.String()).Inc()
		}
		if err == nil {
			return
		}
		level := slog.LevelDebug
		if code == codes.Internal || code == codes.Unknown || code == codes.DataLoss {
			level = slog.LevelWarn
		}
		attrs := []any{"method", method, "code", code.String(), "took", time.Since(began).Round(time.Microsecond)}
		if p, ok := peer.FromContext(ctx); ok && p.Addr != nil {
			attrs = append(attrs, "peer", p.Addr.String())
		}
		if o.client {
			o.log.Log(ctx, level, "grpc call failed", attrs...)
			return
		}
		o.log.Log(ctx, level, "grpc call refused or failed", attrs...)
	}
}
