package resume

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

// Dir is the hidden directory, inside a job's checkpoint directory, that
// holds the records. Its name starts with a dot, so listings of
// checkpoints (task.LatestCheckpoint) never return it.
const Dir = ".spindle-resume"

// settingsName is the file, in Dir, holding the feed's settings.
const settingsName = "feed.json"

// Position is where one rank's feed stood: Batches batches of epoch Epoch
// consumed. A rank that has read an epoch to its end stands at the start
// of the next one. An epoch's batches are the same for the same feed
// settings, so the count says which rows were consumed.
type Position struct {
	Epoch   int   `json:"epoch"`
	Batches int64 `json:"batches"`
}

// String renders the position for logs.
func (p Position) String() string {
	return fmt.Sprintf("epoch %d batch %d", p.Epoch, p.Batches)
}

// Record is what one rank writes once its part of a checkpoint is stored.
type Record struct {
	// Checkpoint names the checkpoint (prefix-step).
	Checkpoint string `json:"checkpoint"`
	// Step is the training step the checkpoint holds.
	Step int64 `json:"step"`
	// Rank and WorldSize are the writer's SPINDLE_RANK and SPINDLE_WORLD_SIZE.
	Rank      int `json:"rank"`
	WorldSize int `json:"world_size"`
	// Files are the checkpoint files this rank committed (none for a rank
	// that only records its position).
	Files []string `json:"files,omitempty"`
	// Feed is the rank's feed position; nil for a rank without a feed.
	Feed *Position `json:"feed,omitempty"`
	// Generation is the writer's SPINDLE_GENERATION, and Replacement its
	// SPINDLE_REPLACEMENT: which process of the rank wrote it (Pin).
	Generation  int `json:"generation"`
	Replacement int `json:"replacement,omitempty"`
	// Time is when the record was written.
	Time time.Time `json:"time"`
}

var nameRe = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.+=-]*$`)

// CheckName accepts a checkpoint name usable as a directory name in every
// file system: letters, digits and _ . + = -, not starting with a dot.
func CheckName(name string) error {
	if !nameRe.MatchString(name) || len(name) > 200 {
		return fmt.Errorf("checkpoint name %q: want letters, digits and _.+=- only, not starting with a dot", name)
	}
	return nil
}

// RecordPath is where rank's record of checkpoint lives, relative to the
// checkpoint directory.
func RecordPath(checkpoint string, rank int) string {
	return path.Join(Dir, checkpoint, rankFile("rank", rank))
}

// recordRank returns the rank whose record file name is (rank-R.json),
// and false for any other name: a save in progress, or not a record.
func recordRank(name string) (int, bool) {
	return fileRank("rank", name)
}

// rankFile names rank's file of a kind: KIND-R.json.
func rankFile(kind string, rank int) string {
	return fmt.Sprintf("%s-%d.json", kind, rank)
}

// fileRank returns the rank a file named KIND-R.json is of, and false for
// any other name.
func fileRank(kind, name string) (int, bool) {
	var rank int
	if n, err := fmt.Sscanf(name, kind+"-%d.json", &rank); n != 1 || err != nil || name != rankFile(kind, rank) {
		return 0, false
	}
	return rank, true
}

// Write stores r atomically under dir (the job's checkpoint directory, as
// resolved by fsy).
func Write(ctx context.Context, fsy fsys.FS, dir string, r Record) error {
	if err := CheckName(r.Checkpoint); err != nil {
		return err
	}
	b, err := json.Marshal(r)
	if err != nil {
		return fmt.Errorf("encode the resume record of %s: %w", r.Checkpoint, err)
	}
	return writeAtomic(ctx, fsy, path.Join(dir, RecordPath(r.Checkpoint, r.Rank)), b)
}

func writeAtomic(ctx context.Context, fsy fsys.FS, file string, b []byte) error {
	if err := fsys.MkdirPrivate(ctx, fsy, path.Dir(file)); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	af, err := fsys.CreatePrivate(ctx, fsy, file)
	if err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	if _, err := af.Write(b); err != nil {
		_ = af.Abort()
		return fmt.Errorf("write %s: %w", file, err)
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("write %s: %w", file, err)
	}
	return nil
}

// Point is a complete checkpoint to resume from.
type Point struct {
	// Checkpoint and Step name it.
	Checkpoint string
	Step       int64
	// World and Generation are the world size and generation of the
	// ranks that recorded it (Latest with any world size).
	World      int
	Generation int
	// Feed holds each rank's feed position, by rank; a rank without a
	// record (one that is not fed) has none (nil).
	Feed []*Position
}

// Latest returns the newest complete checkpoint under dir for a world of
// worldSize ranks of which the ones marked in fed are fed, or nil when
// there is none. Records written before since are passed over (the zero
// time takes every record). With worldSize 0, a checkpoint of any world
// size counts, judged against the world of its records, all of one
// generation, of which every rank must have recorded it (an elastic job,
// whose world changes size). skipped explains the newer checkpoints
// passed over, for logs.
func Latest(ctx context.Context, fsy fsys.FS, dir string, worldSize int, fed []bool, since time.Time) (p *Point, skipped []string, err error) {
	infos, err := fsy.ReadDir(ctx, path.Join(dir, Dir))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("list the checkpoints' resume records in %s: %w", dir, err)
	}
	var names []string
	for _, fi := range infos {
		if fi.IsDir() && CheckName(fi.Name()) == nil {
			names = append(names, fi.Name())
		}
	}
	sort.Slice(names, func(i, j int) bool { return NaturalLess(names[j], names[i]) })
	if worldSize <= 0 {
		fed = nil
	}
	must := make([]bool, max(worldSize, 0))
	anyFed := false
	for r := range must {
		must[r] = r < len(fed) && fed[r]
		anyFed = anyFed || must[r]
	}
	if !anyFed {
		for r := range must {
			must[r] = true
		}
	}
	for _, name := range names {
		p, why, err := complete(ctx, fsy, dir, name, worldSize, must, since)
		if err != nil {
			return nil, skipped, err
		}
		if p != nil {
			return p, skipped, nil
		}
		skipped = append(skipped, name+": "+why)
	}
	return nil, skipped, nil
}

// complete reads the records of one checkpoint and says whether they make
// it complete, and if not why.
func complete(ctx context.Context, fsy fsys.FS, dir, name string, worldSize int, must []bool, since time.Time) (*Point, string, error) {
	infos, err := fsy.ReadDir(ctx, path.Join(dir, Dir, name))
	if err != nil {
		return nil, "", fmt.Errorf("list the resume records of checkpoint %s: %w", name, err)
	}
	anyWorld := worldSize <= 0
	var recs []*Record
	if !anyWorld {
		recs = make([]*Record, worldSize)
	}
	for _, fi := range infos {
		rank, ok := recordRank(fi.Name())
		if !ok {
			continue // a save in progress, or not ours
		}
		b, err := readAll(ctx, fsy, path.Join(dir, Dir, name, fi.Name()))
		if err != nil {
			return nil, "", err
		}
		var r Record
		if err := json.Unmarshal(b, &r); err != nil {
			return nil, fmt.Sprintf("rank %d's record is unreadable (%v)", rank, err), nil
		}
		if r.Time.Before(since) {
			return nil, "taken before this job, with other feed settings", nil
		}
		if anyWorld && recs == nil && r.WorldSize > 0 {
			worldSize, recs, must = r.WorldSize, make([]*Record, r.WorldSize), make([]bool, r.WorldSize)
			for i := range must {
				must[i] = true
			}
		}
		if r.WorldSize != worldSize {
			return nil, fmt.Sprintf("written by a world of %d ranks, this one has %d", r.WorldSize, worldSize), nil
		}
		if rank >= worldSize || r.Rank != rank {
			return nil, fmt.Sprintf("record %s names rank %d", fi.Name(), r.Rank), nil
		}
		recs[rank] = &r
	}
	if recs == nil {
		return nil, "no records", nil
	}
	p := &Point{Checkpoint: name, World: worldSize, Feed: make([]*Position, worldSize)}
	var missing []string
	step := int64(-1)
	for rank, r := range recs {
		if r == nil {
			if must[rank] {
				missing = append(missing, strconv.Itoa(rank))
			}
			continue
		}
		if step >= 0 && r.Step != step {
			return nil, fmt.Sprintf("ranks recorded different steps (%d and %d)", step, r.Step), nil
		}
		if anyWorld && step >= 0 && r.Generation != p.Generation {
			return nil, fmt.Sprintf("ranks of different generations recorded it (%d and %d)", p.Generation, r.Generation), nil
		}
		step, p.Generation = r.Step, r.Generation
		p.Feed[rank] = r.Feed
	}
	if len(missing) > 0 {
		return nil, "no record from rank " + strings.Join(missing, ", ") + " (not every rank finished saving it)", nil
	}
	p.Step = step
	return p, "", nil
}

func readAll(ctx context.Context, fsy fsys.FS, name string) ([]byte, error) {
	f, err := fsy.Open(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, 1<<20))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}

// Settings are what a feed position depends on: the same positions deal
// the same rows only under the same settings.
type Settings struct {
	Ranks             int    `json:"ranks"`
	TotalRows         int64  `json:"total_rows"`
	BatchRows         int    `json:"batch_rows"`
	Shuffle           bool   `json:"shuffle"`
	Seed              int64  `json:"seed"`
	ShuffleBufferRows int    `json:"shuffle_buffer_rows"`
	EvenBatches       string `json:"even_batches"`
	TargetBatches     int64  `json:"target_batches"`
}

// CheckSettings compares s with the settings stored under dir by an
// earlier run, storing s when there are none. It returns false (and why)
// when the stored ones differ: the records there then describe another
// feed and must not be used.
func CheckSettings(ctx context.Context, fsy fsys.FS, dir string, s Settings) (ok bool, why string, err error) {
	want, err := json.Marshal(s)
	if err != nil {
		return false, "", err
	}
	file := path.Join(dir, Dir, settingsName)
	got, err := readAll(ctx, fsy, file)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return true, "", writeAtomic(ctx, fsy, file, want)
	case err != nil:
		return false, "", err
	case bytes.Equal(bytes.TrimSpace(got), want):
		return true, "", nil
	}
	return false, fmt.Sprintf("the checkpoints in %s were taken with other feed settings (%s; now %s)", dir, bytes.TrimSpace(got), want), nil
}

// ReplaceSettings stores s under dir whatever was there.
func ReplaceSettings(ctx context.Context, fsy fsys.FS, dir string, s Settings) error {
	b, err := json.Marshal(s)
	if err != nil {
		return err
	}
	return writeAtomic(ctx, fsy, path.Join(dir, Dir, settingsName), b)
}

// NaturalLess orders strings comparing runs of digits as numbers
// ("ckpt-10" after "ckpt-9").
func NaturalLess(a, b string) bool {
	for a != "" && b != "" {
		da, db := isDigit(a[0]), isDigit(b[0])
		if da && db {
			na, ra := digitRun(a)
			nb, rb := digitRun(b)
			ta, tb := strings.TrimLeft(na, "0"), strings.TrimLeft(nb, "0")
			if len(ta) != len(tb) {
				return len(ta) < len(tb)
			}
			if ta != tb {
				return ta < tb
			}
			if len(na) != len(nb) {
				return len(na) < len(nb)
			}
			a, b = ra, rb
			continue
		}
		if a[0] != b[0] {
			return a[0] < b[0]
		}
		a, b = a[1:], b[1:]
	}
	return len(a) < len(b)
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func digitRun(s string) (run, rest string) {
	i := 0
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	return s[:i], s[i:]
}
