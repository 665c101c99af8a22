// Package rpc is what Spindle's gRPC servers share: one chain of server
// interceptors (a panic in a handler fails the call, not the process; a
// domain error leaves with the gRPC code of its kind) and one way of
// mapping a package's sentinel errors to gRPC codes and back (Codes), so
// that domain code returns plain Go errors and errors.Is works on the far
// side of a call.
package rpc
