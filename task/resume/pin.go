package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

// A worker replaced alone loads the checkpoint the driver chose for it
// only once its process has started, seconds later on a busy host, while
// the ranks that kept running go on saving and pruning. Should the lost
// rank have recorded checkpoints ahead of the others, those complete as
// the others catch up, and pruning would delete the replacement's
// checkpoint before it is read. So the driver pins the checkpoint it hands
// a replacement, and Prune passes over a pinned checkpoint until the pin
// is spent: a newer complete checkpoint holds a record that the
// replacement (or a later process of its rank) wrote, that is, one of the
// pin's generation and replacement or later. A pin is a file beside the
// checkpoint's records; nothing else reads it.

// Pin holds a checkpoint for the replacement of one rank.
type Pin struct {
	Rank int `json:"rank"`
	// Generation and Replacement are the replacement's SPINDLE_GENERATION
	// and SPINDLE_REPLACEMENT.
	Generation  int       `json:"generation"`
	Replacement int       `json:"replacement"`
	Time        time.Time `json:"time"`
}

// PinPath is where the pin of rank's replacement on checkpoint lives,
// relative to the checkpoint directory.
func PinPath(checkpoint string, rank int) string {
	return path.Join(Dir, checkpoint, rankFile("pin-rank", rank))
}

// pinRank returns the rank whose pin file name is (pin-rank-R.json).
func pinRank(name string) (int, bool) {
	return fileRank("pin-rank", name)
}

// PinFor pins checkpoint under dir for p's replacement and reports whether
// the checkpoint is still complete once pinned: false means pruning took
// it meanwhile, and the caller chooses again.
func PinFor(ctx context.Context, fsy fsys.FS, dir, checkpoint string, p Pin) (bool, error) {
	if err := CheckName(checkpoint); err != nil {
		return false, err
	}
	if p.Time.IsZero() {
		p.Time = time.Now().UTC()
	}
	b, err := json.Marshal(p)
	if err != nil {
		return false, fmt.Errorf("encode the pin of checkpoint %s: %w", checkpoint, err)
	}
	// Prune deletes a checkpoint's records before anything else, so a
	// checkpoint still complete after the pin is written is one Prune had
	// not begun to delete; it reads the pins again just before deleting.
	if err := writeAtomic(ctx, fsy, path.Join(dir, PinPath(checkpoint, p.Rank)), b); err != nil {
		return false, fmt.Errorf("pin checkpoint %s for rank %d's replacement: %w", checkpoint, p.Rank, err)
	}
	ok, err := Complete(ctx, fsy, dir, checkpoint)
	if err != nil {
		return false, fmt.Errorf("pin checkpoint %s for rank %d's replacement: %w", checkpoint, p.Rank, err)
	}
	return ok, nil
}

// readPin reads the pin file name of checkpoint, whose rank is rank. An
// unreadable pin counts as one for the first process of generation 0:
// any newer record of its rank spends it. ok is false when it is gone.
func readPin(ctx context.Context, fsy fsys.FS, dir, checkpoint, name string, rank int) (p Pin, ok bool, err error) {
	p = Pin{Rank: rank}
	b, err := readAll(ctx, fsy, path.Join(dir, Dir, checkpoint, name))
	if errors.Is(err, fs.ErrNotExist) {
		return p, false, nil
	}
	if err != nil {
		return p, false, err
	}
	if json.Unmarshal(b, &p) != nil || p.Rank != rank {
		p = Pin{Rank: rank}
	}
	return p, true, nil
}

// spent says whether pin p no longer holds: one of the newer complete
// checkpoints has a record of p's rank written by its replacement or a
// later process.
func (p Pin) spent(newer []stored) bool {
	for _, s := range newer {
		w, ok := s.writers[p.Rank]
		if ok && (w.Generation > p.Generation || w.Generation == p.Generation && w.Replacement >= p.Replacement) {
			return true
		}
	}
	return false
}
