package server

import (
	"errors"

	"google.golang.org/grpc/codes"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// The kinds of the errors the server's calls fail with. Domain code
// returns them (rpc.Errorf keeps the message alone); errorCodes gives
// each its gRPC code at the edge: the server's interceptors for gRPC
// calls, the data link's replies for calls over UCX. Clients read the
// codes and, for a stale ring, the message's start (errStaleRing).
var (
	errBadRequest  = errors.New("ps: bad request")
	errNotFound    = errors.New("ps: not found")
	errExists      = errors.New("ps: declared already")
	errWrongState  = errors.New("ps: not in a state to do this")
	errRetry       = errors.New("ps: retry")
	errUnavailable = errors.New("ps: unavailable")
	errNoMemory    = errors.New("ps: out of memory")
	errInternal    = errors.New("ps: internal error")
	errCanceled    = errors.New("ps: canceled")
	errTimedOut    = errors.New("ps: timed out")
)

// errorCodes maps the kinds to their gRPC codes.
var errorCodes = rpc.Codes{
	{Err: errBadRequest, Code: codes.InvalidArgument},
	{Err: errNotFound, Code: codes.NotFound},
	{Err: errExists, Code: codes.AlreadyExists},
	{Err: errWrongState, Code: codes.FailedPrecondition},
	{Err: errRetry, Code: codes.Aborted},
	{Err: errUnavailable, Code: codes.Unavailable},
	{Err: errNoMemory, Code: codes.ResourceExhausted},
	{Err: errInternal, Code: codes.Internal},
	{Err: errCanceled, Code: codes.Canceled},
	{Err: errTimedOut, Code: codes.DeadlineExceeded},
}
