package apierr

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

func TestRoundTrip(t *testing.T) {
	for _, e := range Codes {
		t.Run(e.Err.Error(), func(t *testing.T) {
			wrapped := fmt.Errorf("%w: need 4 executors", e.Err)
			st := ToStatus(wrapped)
			if got := status.Code(st); got != e.Code {
				t.Fatalf("code %v, want %v", got, e.Code)
			}
			back := FromStatus(st)
			if !errors.Is(back, e.Err) {
				t.Fatalf("FromStatus(%v) does not wrap %v", st, e.Err)
			}
			if back.Error() != wrapped.Error() {
				t.Fatalf("message %q, want %q", back.Error(), wrapped.Error())
			}
			// A forwarded error keeps its code.
			if got := status.Code(ToStatus(back)); got != e.Code {
				t.Fatalf("forwarded code %v, want %v", got, e.Code)
			}
		})
	}
}

func TestOtherErrors(t *testing.T) {
	if got := status.Code(ToStatus(errors.New("boom"))); got != codes.Internal {
		t.Fatalf("plain error code %v, want Internal", got)
	}
	if got := status.Code(ToStatus(fmt.Errorf("wait: %w", context.DeadlineExceeded))); got != codes.DeadlineExceeded {
		t.Fatalf("deadline code %v", got)
	}
	if !Retryable(status.Error(codes.Unavailable, "connection refused")) {
		t.Fatal("Unavailable should be retryable")
	}
	if Retryable(ToStatus(ErrNoRoom)) {
		t.Fatal("ErrNoRoom should not be retryable")
	}
	if ToStatus(nil) != nil {
		t.Fatal("nil error")
	}
}
