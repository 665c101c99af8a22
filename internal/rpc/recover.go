package rpc

import (
	"context"
	"log/slog"
	"runtime/debug"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// recoverOptions returns the interceptors that recover a panic in a call's
// handler (or in any interceptor after them) and fail the call with
// codes.Internal, logging the panic and its stack to log (nil:
// slog.Default()). Pass them before any other interceptor.
func recoverOptions(log *slog.Logger) []grpc.ServerOption {
	if log == nil {
		log = slog.Default()
	}
	return []grpc.ServerOption{
		grpc.ChainUnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
			defer func() {
				if p := recover(); p != nil {
					err = recovered(log, info.FullMethod, p)
				}
			}()
			return h(ctx, req)
		}),
		grpc.ChainStreamInterceptor(func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
			defer func() {
				if p := recover(); p != nil {
					err = recovered(log, info.FullMethod, p)
				}
			}()
			return h(srv, ss)
		}),
	}
}

func recovered(log *slog.Logger, method string, p any) error {
	log.Error("grpc handler panicked; the call fails, the server goes on", "method", method, "panic", p, "stack", string(debug.Stack()))
	return status.Errorf(codes.Internal, "%s: internal error (the server logged it)", method)
}
