package plan

import (
	"context"

	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed"
)

// CheckInputs lists the inputs as Plan does, without opening their files:
// an input that names nothing, or a file system that cannot be reached,
// is found where the job is submitted. A cluster-mode submit checks so
// before its driver starts in the cluster. Errors wrap ErrInput (or
// ErrUnavailable) and name the input.
func CheckInputs(ctx context.Context, res *fsys.Resolver, inputs []string, format feed.Format) error {
	_, _, err := listInputs(ctx, res, inputs, format)
	return err
}
