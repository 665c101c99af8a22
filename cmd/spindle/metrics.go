package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spindle-ml/spindle/observe/metrics"
)

// serveMetrics serves c's metrics (and the Go runtime's) at /metrics on
// addr until ctx ends; run waits for the server to stop. An empty addr
// serves nothing.
func serveMetrics(ctx context.Context, addr string, c prometheus.Collector, logger *slog.Logger) (run func() error, err error) {
	if addr == "" {
		return func() error { return nil }, nil
	}
	reg := metrics.NewRegistry()
	if err := reg.Register(c); err != nil {
		return nil, fmt.Errorf("metrics: %w", err)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serve metrics on %s: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", metrics.Handler(reg))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	logger.Info("serving metrics", "url", "http://"+lis.Addr().String()+"/metrics")
	return func() error {
		stop := context.AfterFunc(ctx, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
		defer stop()
		if err := srv.Serve(lis); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return fmt.Errorf("metrics on %s: %w", addr, err)
		}
		return nil
	}, nil
}
