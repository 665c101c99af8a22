package ucx

import "errors"

// ErrUnavailable means this binary cannot use UCX: it was built without
// -tags ucx, or libucp could not be loaded.
var ErrUnavailable = errors.New("ucx: not available")
