package feed

import "errors"

// ErrInput is wrapped by every error about the job's input found while
// planning (a missing path, a glob matching nothing, a bad file, differing
// schemas, an unknown column), so callers can tell bad input from failures
// while running.
var ErrInput = errors.New("feed: bad input")

// ErrClosed is returned by readers and pipelines used after Close.
var ErrClosed = errors.New("feed: closed")
