package apierr

import (
	"errors"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// Sentinel errors. Messages start with the package prefix "standalone:".
var (
	ErrNotLeader     = errors.New("standalone: this master is not the leader")
	ErrNoLeader      = errors.New("standalone: no master leads the cluster")
	ErrNoRoom        = errors.New("standalone: not enough room in the cluster")
	ErrOverCap       = errors.New("standalone: request exceeds the per-application cap")
	ErrBadRequest    = errors.New("standalone: bad request")
	ErrUnknownApp    = errors.New("standalone: unknown application")
	ErrAppEnded      = errors.New("standalone: application has ended")
	ErrUnknownWorker = errors.New("standalone: unknown worker")
	ErrLaunch        = errors.New("standalone: executor launch failed")
	ErrAmbiguous     = errors.New("standalone: name matches more than one application")
	ErrStopped       = errors.New("standalone: server stopped")
	ErrWrongWorker   = errors.New("standalone: call meant for another worker")
	ErrDuplicateID   = errors.New("standalone: worker id in use by a running worker")
	ErrNeverFits     = errors.New("standalone: the request can never fit on the cluster's workers")
)

// Codes is the standalone API's table of error kinds and their codes,
// which the master's and workers' servers map their handlers' errors with.
var Codes = rpc.Codes{
	{Err: ErrNotLeader, Code: codes.Unavailable},
	{Err: ErrNoLeader, Code: codes.Unavailable},
	{Err: ErrStopped, Code: codes.Unavailable},
	{Err: ErrNoRoom, Code: codes.ResourceExhausted},
	{Err: ErrOverCap, Code: codes.OutOfRange},
	{Err: ErrBadRequest, Code: codes.InvalidArgument},
	{Err: ErrUnknownApp, Code: codes.NotFound},
	{Err: ErrAppEnded, Code: codes.FailedPrecondition},
	{Err: ErrUnknownWorker, Code: codes.NotFound},
	{Err: ErrLaunch, Code: codes.Aborted},
	{Err: ErrAmbiguous, Code: codes.InvalidArgument},
	{Err: ErrWrongWorker, Code: codes.FailedPrecondition},
	{Err: ErrDuplicateID, Code: codes.AlreadyExists},
	{Err: ErrNeverFits, Code: codes.InvalidArgument},
}

// ToStatus turns an error into a gRPC status error for the wire. Errors
// that wrap a sentinel get its code; context errors keep theirs; anything
// else is Internal. The message is the error's full text.
func ToStatus(err error) error { return Codes.ToStatus(err) }

// FromStatus turns a gRPC status error back into an error that wraps the
// sentinel the server returned. Other errors are returned unchanged.
func FromStatus(err error) error { return Codes.FromStatus(err) }

// Retryable says whether a call that failed with err may succeed on another
// master or a little later: the master was not the leader, was stopping,
// or could not be reached.
func Retryable(err error) bool {
	if errors.Is(err, ErrNotLeader) || errors.Is(err, ErrNoLeader) || errors.Is(err, ErrStopped) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.Unavailable
}
