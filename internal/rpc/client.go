package rpc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
)

// ClientConfig is what a Spindle gRPC client connection is made with.
type ClientConfig struct {
	// Logger gets failed calls at debug level, or warn for Internal
	// and Unknown (nil: slog.Default()).
	Logger *slog.Logger
	// Metrics counts the connection's calls by method and code (nil:
	// none).
	Metrics *Metrics
	// Options are the connection's credentials (transport credentials,
	// per-call signatures) and any other dial options, after the chain.
	Options []grpc.DialOption
}

// NewClient returns a connection to addr (grpc.NewClient) with Spindle's
// client interceptor chain (ClientOptions) and cfg.Options.
func NewClient(addr string, cfg ClientConfig) (*grpc.ClientConn, error) {
	return grpc.NewClient(addr, append(ClientOptions(cfg), cfg.Options...)...)
}

// ClientOptions returns the interceptor chain of a Spindle gRPC client:
// the count and the log of every call's outcome (observer).
func ClientOptions(cfg ClientConfig) []grpc.DialOption {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	o := observer{log: log, metrics: cfg.Metrics, client: true}
	return []grpc.DialOption{
		grpc.WithChainUnaryInterceptor(func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
			done := o.start(ctx, method)
			err := invoker(ctx, method, req, reply, cc, opts...)
			done(err)
			return err
		}),
		grpc.WithChainStreamInterceptor(func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
			done := o.start(ctx, method)
			cs, err := streamer(ctx, desc, cc, method, opts...)
			// A stream's outcome comes later, from its messages; the
			// count is of streams opened, and of those refused here.
			done(err)
			return cs, err
		}),
	}
}
