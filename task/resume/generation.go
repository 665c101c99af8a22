package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"

	"github.com/spindle-ml/spindle/fsys"
)

// NextGeneration returns one more than the highest generation any record
// under dir names, or 0 when there is none. A driver that starts over a
// checkpoint directory earlier gangs wrote to (YARN's next application
// attempt, a job submitted again after its driver died) numbers its
// generations from there: completeness, and with it what Prune may
// delete, tells gangs apart by generation alone, so a gang that reused an
// earlier one's number would complete that gang's half-done checkpoints
// with its own records and could prune the checkpoint it resumed from
// before all its ranks had loaded it.
func NextGeneration(ctx context.Context, fsy fsys.FS, dir string) (int, error) {
	infos, err := fsy.ReadDir(ctx, path.Join(dir, Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("list the checkpoints' resume records in %s: %w", dir, err)
	}
	next := 0
	for _, fi := range infos {
		if !fi.IsDir() || CheckName(fi.Name()) != nil {
			continue
		}
		recs, err := fsy.ReadDir(ctx, path.Join(dir, Dir, fi.Name()))
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile
		}
		if err != nil {
			return 0, fmt.Errorf("list the resume records of checkpoint %s: %w", fi.Name(), err)
		}
		for _, ri := range recs {
			if _, ok := recordRank(ri.Name()); !ok {
				continue // a save in progress, or not ours
			}
			b, err := readAll(ctx, fsy, path.Join(dir, Dir, fi.Name(), ri.Name()))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return 0, err
			}
			var r Record
			if json.Unmarshal(b, &r) != nil {
				continue // unreadable records complete nothing
			}
			next = max(next, r.Generation+1)
		}
	}
	return next, nil
}
