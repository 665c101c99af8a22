package rpc

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Code is the gRPC code the errors of one kind travel with: those that
// wrap (errors.Is) Err.
type Code struct {
	Err  error
	Code codes.Code
}

// Codes is a package's table of error kinds and their codes; the first
// kind an error matches wins.
type Codes []Code

// code returns the code of err's kind.
func (t Codes) code(err error) (codes.Code, bool) {
	for _, e := range t {
		if errors.Is(err, e.Err) {
			return e.Code, true
		}
	}
	return codes.OK, false
}

// ToStatus turns an error into a gRPC status error for the wire: a status
// error is kept; one of a kind in t gets its code; a context error keeps
// its code; anything else is Internal. The message is the error's text.
func (t Codes) ToStatus(err error) error { return t.toStatus(err, codes.Internal) }

// toStatus is ToStatus with otherwise as the code of errors of no kind.
func (t Codes) toStatus(err error, otherwise codes.Code) error {
	if err == nil {
		return nil
	}
	mapped := t.Map(err)
	if _, ok := status.FromError(mapped); ok {
		return mapped
	}
	return status.Error(otherwise, err.Error())
}

// Map is err as a status error when it is of a kind in t and not a
// status error already, a context error with its code, else err itself:
// what the server's interceptors
// do to the errors its handlers return.
func (t Codes) Map(err error) error {
	if _, ok := status.FromError(err); ok {
		return err
	}
	if c, ok := t.code(err); ok {
		return status.Error(c, err.Error())
	}
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return status.FromContextError(err).Err()
	}
	return err
}

// wireError is an error that came over the wire: its text as sent, and
// the kind it was of on the server.
type wireError struct {
	msg  string
	kind error
	code codes.Code
}

func (e *wireError) Error() string { return e.msg }
func (e *wireError) Unwrap() error { return e.kind }

// GRPCStatus keeps the status code, so the error can be forwarded.
func (e *wireError) GRPCStatus() *status.Status { return status.New(e.code, e.msg) }

// FromStatus turns a gRPC status error back into an error of the kind the
// server returned, when its code is the kind's and its message starts
// with the kind's text. Other errors are returned unchanged.
func (t Codes) FromStatus(err error) error {
	st, ok := status.FromError(err)
	if !ok || err == nil {
		return err
	}
	for _, e := range t {
		if st.Code() == e.Code && strings.HasPrefix(st.Message(), e.Err.Error()) {
			return &wireError{msg: st.Message(), kind: e.Err, code: e.Code}
		}
	}
	return err
}

// kindError is an error of a kind whose text is its message alone.
type kindError struct {
	kind error
	msg  string
}

func (e *kindError) Error() string        { return e.msg }
func (e *kindError) Is(target error) bool { return target == e.kind }

// Errorf returns an error of kind (errors.Is(err, kind)) whose text is the
// formatted message alone, without the kind's own text: for domain errors
// whose wire message is read by people and clients as it is.
func Errorf(kind error, format string, args ...any) error {
	return &kindError{kind: kind, msg: fmt.Sprintf(format, args...)}
}
