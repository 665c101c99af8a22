//go:build !ucx

package ucx

import (
	"fmt"

	"github.com/spindle-ml/spindle/collective"
)

// Available reports whether this binary can use UCX, and why not: this one
// was built without -tags ucx.
func Available() (ok bool, detail string) {
	return false, "built without UCX support (build with -tags ucx)"
}

// NewLinker fails: this binary was built without -tags ucx.
func NewLinker() (collective.Linker, error) {
	return nil, fmt.Errorf("%w: built without UCX support (build with -tags ucx)", ErrUnavailable)
}
