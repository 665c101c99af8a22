package rpc

import (
	"context"
	"log/slog"

	"google.golang.org/grpc"
)

// ServerOptions returns the interceptor chain of a Spindle gRPC server:
// first panic recovery (a panicking handler fails its call with
// codes.Internal, logged to log), then the mapping of the errors handlers
// return of a kind in t to their codes (other errors go out as gRPC
// makes them). Pass them before any other option.
func ServerOptions(log *slog.Logger, t Codes) []grpc.ServerOption {
	opts := recoverOptions(log)
	if len(t) == 0 {
		return opts
	}
	return append(opts,
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
			resp, err := h(ctx, req)
			return resp, t.Map(err)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
			return t.Map(h(srv, ss))
		}))
}
