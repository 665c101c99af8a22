package rpc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
)

// ServerConfig is what a Spindle gRPC server is built with.
type ServerConfig struct {
	// Logger gets panics and failed calls (nil: slog.Default()).
	Logger *slog.Logger
	// Codes maps the error kinds the handlers return to their codes.
	Codes Codes
	// Otherwise, when not OK, is the code of a handler's error of no
	// kind in Codes (and no status or context error); OK leaves such
	// errors as gRPC sends them (Unknown).
	Otherwise codes.Code
	// Metrics counts the server's calls by method and code (nil: none).
	Metrics *Metrics
	// Options are the server's credentials (internal/auth's signer,
	// internal/peercred's or standalone's transport credentials) and any
	// other options, applied after the chain.
	Options []grpc.ServerOption
}

// NewServer returns a gRPC server with Spindle's interceptor chain
// (ServerOptions) and cfg.Options.
func NewServer(cfg ServerConfig) *grpc.Server {
	return grpc.NewServer(append(ServerOptions(cfg), cfg.Options...)...)
}

// ServerOptions returns the interceptor chain of a Spindle gRPC server:
// first panic recovery (a panicking handler fails its call with
// codes.Internal, logged), then the mapping of the errors handlers return
// to codes (cfg.Codes, cfg.Otherwise), then the count and the log of
// every call's outcome, which see the codes the caller gets. Pass them
// before any other option: authentication (the credentials, or an
// interceptor in cfg.Options) refuses a call before its handler runs.
func ServerOptions(cfg ServerConfig) []grpc.ServerOption {
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	mapErr := func(err error) error {
		if err == nil || (len(cfg.Codes) == 0 && cfg.Otherwise == codes.OK) {
			return err
		}
		if cfg.Otherwise != codes.OK {
			return cfg.Codes.toStatus(err, cfg.Otherwise)
		}
		return cfg.Codes.Map(err)
	}
	o := observer{log: log, metrics: cfg.Metrics}
	return append(recoverOptions(log),
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			done := o.start(ctx, info.FullMethod)
			resp, err := h(ctx, req)
			err = mapErr(err)
			done(err)
			return resp, err
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			done := o.start(ss.Context(), info.FullMethod)
			err := mapErr(h(srv, ss))
			done(err)
			return err
		}))
}
