package resume

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

// A checkpoint's retention: once a new checkpoint is complete, the
// complete checkpoints of the same prefix beyond the keep most recently
// completed are deleted. Completeness here is the strict form (every rank
// of the world that recorded it, all of one generation: Latest with any
// world size), so a checkpoint some rank has not recorded yet (a save under
// way, or one a failed generation left half done) is never deleted, and
// neither is any of the keep newest complete ones, among them the one the
// driver would resume from, nor one pinned for a replacement that has not
// recorded a newer one yet (Pin).

// stored is one checkpoint's records as Prune reads them.
type stored struct {
	name      string
	completed time.Time // the newest record's time
	files     []string  // the files the records name
	records   []string  // the file names in its record directory: records and pins
	// writers are the generation and replacement of each rank's record.
	writers map[int]writer
	pins    []Pin
}

// writer is who wrote a record: which generation, which replacement.
type writer struct{ Generation, Replacement int }

// Complete says whether checkpoint name under dir is complete in the strict
// sense: every rank of the world that recorded it has, all of one
// generation and step.
func Complete(ctx context.Context, fsy fsys.FS, dir, name string) (bool, error) {
	if err := CheckName(name); err != nil {
		return false, err
	}
	p, _, err := complete(ctx, fsy, dir, name, 0, nil, time.Time{})
	if errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	return p != nil, err
}

// Prune deletes the complete checkpoints named PREFIX-STEP under dir
// beyond the keep most recently completed ones (by their records' times),
// and returns their names, oldest first. Each goes records first, so that
// it stops being complete before any of its files goes: a crash half-way
// leaves files no record stands for, never a record of a missing file.
// Files and records already gone (another rank pruning at the same time)
// are not an error. keep below 1 deletes nothing.
func Prune(ctx context.Context, fsy fsys.FS, dir, prefix string, keep int) ([]string, error) {
	if keep < 1 {
		return nil, nil
	}
	infos, err := fsy.ReadDir(ctx, path.Join(dir, Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list the checkpoints' resume records in %s: %w", dir, err)
	}
	var done []stored
	for _, fi := range infos {
		name := fi.Name()
		step, ok := strings.CutPrefix(name, prefix+"-")
		if !fi.IsDir() || !ok || step == "" || strings.Trim(step, "0123456789") != "" {
			continue
		}
		p, _, err := complete(ctx, fsy, dir, name, 0, nil, time.Time{})
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile
		}
		if err != nil {
			return nil, err
		}
		if p == nil {
			continue
		}
		s, err := readStored(ctx, fsy, dir, name)
		if err != nil {
			return nil, err
		}
		done = append(done, s)
	}
	if len(done) <= keep {
		return nil, nil
	}
	// Newest completed first; names break ties.
	sort.Slice(done, func(i, j int) bool {
		if !done[i].completed.Equal(done[j].completed) {
			return done[i].completed.After(done[j].completed)
		}
		return NaturalLess(done[j].name, done[i].name)
	})
	var removed []string
	for i := len(done) - 1; i >= keep; i-- {
		// Read again just before deleting: a pin written since the
		// listing holds the checkpoint (PinFor).
		s, err := readStored(ctx, fsy, dir, done[i].name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // pruned meanwhile
		}
		if err != nil {
			return removed, err
		}
		if s.pinned(done[:i]) {
			continue
		}
		if err := remove(ctx, fsy, dir, s); err != nil {
			return removed, err
		}
		removed = append(removed, s.name)
	}
	return removed, nil
}

// pinned says whether a pin on s holds, given the checkpoints completed
// after it.
func (s stored) pinned(newer []stored) bool {
	for _, p := range s.pins {
		if !p.spent(newer) {
			return true
		}
	}
	return false
}

// PruneAfter prunes (Prune) once checkpoint, which the caller has just
// recorded, is complete, and does nothing before: so the rank whose record
// completes a checkpoint deletes the old ones.
func PruneAfter(ctx context.Context, fsy fsys.FS, dir, checkpoint, prefix string, keep int) ([]string, error) {
	done, err := Complete(ctx, fsy, dir, checkpoint)
	if err != nil || !done {
		return nil, err
	}
	return Prune(ctx, fsy, dir, prefix, keep)
}

// readStored reads the records of checkpoint name for what Prune needs.
func readStored(ctx context.Context, fsy fsys.FS, dir, name string) (stored, error) {
	s := stored{name: name, writers: map[int]writer{}}
	infos, err := fsy.ReadDir(ctx, path.Join(dir, Dir, name))
	if err != nil {
		return s, fmt.Errorf("list the resume records of checkpoint %s: %w", name, err)
	}
	for _, fi := range infos {
		if fi.IsDir() {
			continue
		}
		s.records = append(s.records, fi.Name())
		if rank, ok := pinRank(fi.Name()); ok {
			p, ok, err := readPin(ctx, fsy, dir, name, fi.Name(), rank)
			if err != nil {
				return s, err
			}
			if ok {
				s.pins = append(s.pins, p)
			}
			continue
		}
		rank, ok := recordRank(fi.Name())
		if !ok {
			continue
		}
		b, err := readAll(ctx, fsy, path.Join(dir, Dir, name, fi.Name()))
		if err != nil {
			return s, err
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			continue // complete() judged the readable ones
		}
		s.writers[rank] = writer{r.Generation, r.Replacement}
		if r.Time.After(s.completed) {
			s.completed = r.Time
		}
		for _, f := range r.Files {
			if CheckName(f) == nil && !slices.Contains(s.files, f) {
				s.files = append(s.files, f)
			}
		}
	}
	return s, nil
}

// remove deletes one checkpoint: its records, their directory, then the
// files they named.
func remove(ctx context.Context, fsy fsys.FS, dir string, s stored) error {
	gone := func(name string) error {
		if err := fsy.Remove(ctx, name); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("delete old checkpoint %s: %w", s.name, err)
		}
		return nil
	}
	for _, r := range s.records {
		if err := gone(path.Join(dir, Dir, s.name, r)); err != nil {
			return err
		}
	}
	if err := gone(path.Join(dir, Dir, s.name)); err != nil {
		return err
	}
	for _, f := range s.files {
		if err := gone(path.Join(dir, f)); err != nil {
			return err
		}
	}
	return nil
}
