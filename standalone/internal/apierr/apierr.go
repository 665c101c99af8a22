package apierr

import (
	"context"
	"errors"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
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

var table = []struct {
	err  error
	code codes.Code
}{
	{ErrNotLeader, codes.Unavailable},
	{ErrNoLeader, codes.Unavailable},
	{ErrStopped, codes.Unavailable},
	{ErrNoRoom, codes.ResourceExhausted},
	{ErrOverCap, codes.OutOfRange},
	{ErrBadRequest, codes.InvalidArgument},
	{ErrUnknownApp, codes.NotFound},
	{ErrAppEnded, codes.FailedPrecondition},
	{ErrUnknownWorker, codes.NotFound},
	{ErrLaunch, codes.Aborted},
	{ErrAmbiguous, codes.InvalidArgument},
	{ErrWrongWorker, codes.FailedPrecondition},
	{ErrDuplicateID, codes.AlreadyExists},
	{ErrNeverFits, codes.InvalidArgument},
}

// ToStatus turns an error into a gRPC status error for the wire. Errors
// that wrap a sentinel get its code; context errors keep theirs; anything
// else is Internal. The message is the error's full text.
func ToStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok {
		return err
	}
	for _, e := range table {
		if errors.Is(err, e.err) {
			return status.Error(e.code, err.Error())
		}
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(err).Err()
	}
	return status.Error(codes.Internal, err.Error())
}

// wireError is an error that came over the wire: its text as sent, and the
// sentinel it wrapped on the server.
type wireError struct {
	msg      string
	sentinel error
	code     codes.Code
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.sentinel }

// GRPCStatus keeps the status code, so the error can be forwarded.
func (e *wireError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

// FromStatus turns a gRPC status error back into an error that wraps the
// sentinel the server returned. Other errors are returned unchanged.
func FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	for _, e := range table {
		if st.Code() == e.code && strings.HasPrefix(st.Message(), e.err.Error()) {
			return &wireError{msg: st.Message(), sentinel: e.err, code: e.code}
		}
	}
	return err
}

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
