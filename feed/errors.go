package feed

import "errors"

// ErrInput is wrapped by every error about the job's input found while
// planning (a missing path, a glob matching nothing, a bad file, differing
// schemas, an unknown column), so callers can tell bad input from failures
// while running.
var ErrInput = errors.New("feed: bad input")

// ErrUnavailable is wrapped by errors of planning that come from an input
// file system that could not be reached (a namenode down or restarting),
// after retrying for PlanRequest.RetryUnavailable: the input may be fine,
// so it is not ErrInput.
var ErrUnavailable = errors.New("feed: input file system unavailable")

// ErrClosed is returned by readers and pipelines used after Close.
var ErrClosed = errors.New("feed: closed")
