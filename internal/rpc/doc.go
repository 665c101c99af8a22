// Package rpc is what Spindle's gRPC servers share: one chain of server
// interceptors (ServerOptions) and one way of mapping a package's error
// kinds to gRPC codes and back (Codes), so that domain code returns plain
// Go errors and errors.Is works on the far side of a call.
//
// Every Spindle gRPC server puts ServerOptions first. Its first link keeps
// a panic in a handler from taking the process down: a handler that
// panics on input nobody foresaw fails that one call with codes.Internal,
// logged with its stack, and the server goes on serving. Its second gives
// the errors a handler returns the codes of their kinds.
package rpc
