// Package rpc is what Spindle's gRPC servers and clients share: their
// constructors (NewServer, NewClient) with one chain of interceptors,
// and one way of mapping a package's error kinds to gRPC codes and back
// (Codes), so that domain code returns plain Go errors and errors.Is
// works on the far side of a call.
//
// A server's chain first keeps a panic in a handler from taking the
// process down: a handler that panics on input nobody foresaw fails that
// one call with codes.Internal, logged with its stack, and the server
// goes on serving. Then the errors a handler returns get the codes of
// their kinds. Last, every call is counted by method and code (Metrics,
// on a registry passed in) and a failed one is logged with its method,
// code, duration and peer, never with its request or metadata, where
// tokens travel. A client's chain counts and logs its calls the same way.
//
// Each credential scheme (internal/auth's per-call signatures,
// internal/peercred's transport credentials, the standalone manager's
// secure package) stays in its package and is passed to NewServer and
// NewClient as options: a call they refuse is counted and logged by the
// chain like any other.
package rpc
