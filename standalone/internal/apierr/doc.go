// Package apierr holds the standalone cluster manager's sentinel errors and
// the one table (an rpc.Codes) that maps them to gRPC status codes and
// back, so errors.Is works on the far side of a call.
package apierr
