package plan

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed"
)

// retryBackoff is the first wait between planning attempts; it doubles up
// to retryBackoffMax.
const (
	retryBackoff    = 500 * time.Millisecond
	retryBackoffMax = 5 * time.Second
)

// retryUnavailable calls attempt until it succeeds, fails with an error
// other than ErrUnavailable, ctx ends, or bound has passed since the first
// failure.
func retryUnavailable(ctx context.Context, bound time.Duration, attempt func() error) error {
	if bound == 0 {
		bound = feed.DefaultRetryUnavailable
	}
	start := time.Now()
	wait := retryBackoff
	for tries := 1; ; tries++ {
		err := attempt()
		if err == nil || !errors.Is(err, feed.ErrUnavailable) {
			return err
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if bound < 0 || time.Since(start)+wait > bound {
			return fmt.Errorf("%w (gave up after %d attempts in %s)", err, tries, time.Since(start).Round(time.Second))
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		wait = min(2*wait, retryBackoffMax)
	}
}

// unreachable reports whether err says a remote file system could not be
// reached or dropped the connection, rather than that the input is wrong.
func unreachable(err error) bool {
	var ne net.Error
	switch {
	case errors.Is(err, fsys.ErrHadoopConfig):
		// A namenode host that does not resolve is a net.Error too.
		return false
	case errors.Is(err, fsys.ErrNamenodeUnreachable),
		errors.As(err, &ne),
		errors.Is(err, syscall.ECONNREFUSED), errors.Is(err, syscall.ECONNRESET),
		errors.Is(err, syscall.EPIPE), errors.Is(err, syscall.ETIMEDOUT),
		errors.Is(err, syscall.EHOSTUNREACH), errors.Is(err, syscall.ENETUNREACH),
		errors.Is(err, io.ErrUnexpectedEOF):
		return true
	}
	return false
}

// planError classifies an error met while listing or opening an input:
// the context's own end, ErrUnavailable when the file system could not be
// reached, ErrInput otherwise. what names the input or file.
func planError(ctx context.Context, what string, err error) error {
	switch {
	case ctx.Err() != nil:
		return ctx.Err()
	case unreachable(err):
		return fmt.Errorf("%w: %s: %w", feed.ErrUnavailable, what, err)
	}
	return fmt.Errorf("%w: %s: %w", feed.ErrInput, what, err)
}
