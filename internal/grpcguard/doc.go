// Package grpcguard keeps a panic in a gRPC handler from taking its
// process down: every Spindle gRPC server puts its interceptors first, so
// a handler that panics on input nobody foresaw fails that one call with
// codes.Internal, logged with its stack, and the server goes on serving.
package grpcguard
