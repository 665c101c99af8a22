package wire

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/spindle-ml/spindle/feed"
)

// DirectVersion is the version of the direct-mode JSON this package writes
// and reads.
const DirectVersion = 1

// DirectSpec tells a direct-mode training process which splits to read
// itself. Its JSON form is documented in docs/feed-protocol.md.
type DirectSpec struct {
	// Version is DirectVersion; WriteDirectSpec sets it.
	Version   int `json:"version"`
	Rank      int `json:"rank"`
	WorldSize int `json:"world_size"`
	Epochs    int `json:"epochs"`
	BatchRows int `json:"batch_rows"`
	// Columns are the selected columns (--columns); empty means every
	// column of the input.
	Columns []string `json:"columns"`
	// LabelColumn is the label column (--label-column), empty when there
	// is none. Readers put it last, as the socket modes do.
	LabelColumn string `json:"label_column"`
	Shuffle     bool   `json:"shuffle"`
	Seed        int64  `json:"seed"`
	// EvenBatches and TargetBatches keep ranks in step: with "pad" or
	// "drop", every rank yields exactly TargetBatches batches per epoch,
	// padding with repeated rows of its own splits or stopping early. With
	// "off" (TargetBatches 0) each rank yields what its splits hold.
	EvenBatches   feed.EvenMode `json:"even_batches"`
	TargetBatches int64         `json:"target_batches"`
	// EpochRows is, with "pad", the rows the rank yields per epoch
	// (feed.EvenRows): only the batch count is equalised, so the last
	// batch may be short. Zero means TargetBatches full batches.
	EpochRows int64 `json:"epoch_rows,omitempty"`
	// EpochRowLimit is the rows the rank yields per epoch, reading its
	// splits over again when they hold fewer (feed.EpochRowLimit); zero
	// means its own rows, once. Readers follow the epoch rules of the feed
	// package with it and ShuffleBufferRows, so that direct and pushed
	// feeding yield the same rows in the same batches.
	EpochRowLimit int64 `json:"epoch_row_limit,omitempty"`
	// ShuffleBufferRows is the shuffle window in rows when Shuffle is set
	// (1: split order only).
	ShuffleBufferRows int `json:"shuffle_buffer_rows,omitempty"`
	// StartEpoch and StartBatch are where a resumed feed starts: readers
	// begin with epoch StartEpoch and drop its first StartBatch batches.
	StartEpoch int   `json:"start_epoch,omitempty"`
	StartBatch int64 `json:"start_batch,omitempty"`
	// CSV describes the CSV splits' layout; nil when there are none.
	CSV *DirectCSV `json:"csv,omitempty"`
	// Splits are this rank's splits, in the order to read them.
	Splits []feed.Split `json:"splits"`
}

// DirectCSV is the layout of CSV inputs in a DirectSpec.
type DirectCSV struct {
	// Delimiter is the one-character field separator; empty picks it by
	// each file's name: a tab for .tsv and .tab, a comma otherwise.
	Delimiter string `json:"delimiter"`
	// Header says each file starts with a line naming the columns.
	Header bool `json:"header"`
}

// Validate reports the first inconsistency in the spec.
func (s DirectSpec) Validate() error {
	switch {
	case s.WorldSize < 1:
		return fmt.Errorf("world_size %d: need at least 1", s.WorldSize)
	case s.Rank < 0 || s.Rank >= s.WorldSize:
		return fmt.Errorf("rank %d is outside 0..%d", s.Rank, s.WorldSize-1)
	case s.Epochs < 1:
		return fmt.Errorf("epochs %d: need at least 1", s.Epochs)
	case s.StartEpoch < 0 || s.StartBatch < 0:
		return fmt.Errorf("start at epoch %d batch %d: must not be negative", s.StartEpoch, s.StartBatch)
	case s.BatchRows < 1:
		return fmt.Errorf("batch_rows %d: need at least 1", s.BatchRows)
	}
	if s.EvenBatches != "" {
		if _, err := feed.ParseEvenMode(string(s.EvenBatches)); err != nil {
			return fmt.Errorf("even_batches: %w", err)
		}
	}
	if s.TargetBatches < 0 {
		return fmt.Errorf("target_batches %d: must not be negative", s.TargetBatches)
	}
	if s.EpochRows < 0 {
		return fmt.Errorf("epoch_rows %d: must not be negative", s.EpochRows)
	}
	if s.EpochRowLimit < 0 {
		return fmt.Errorf("epoch_row_limit %d: must not be negative", s.EpochRowLimit)
	}
	if s.Shuffle && s.ShuffleBufferRows < 1 {
		return fmt.Errorf("shuffle_buffer_rows %d: need at least 1 when shuffling", s.ShuffleBufferRows)
	}
	if s.CSV != nil && len(s.CSV.Delimiter) > 1 {
		return fmt.Errorf("csv delimiter %q: want one single-byte character (or none: by the file name)", s.CSV.Delimiter)
	}
	for i, sp := range s.Splits {
		if sp.URI == "" {
			return fmt.Errorf("split %d has no uri", i)
		}
		f, err := feed.ParseFormat(string(sp.Format))
		if err != nil {
			return fmt.Errorf("split %d (%s): %w", i, sp.URI, err)
		}
		if f == feed.FormatCSV && s.CSV == nil {
			return fmt.Errorf("split %d (%s) is CSV but the spec has no csv layout", i, sp.URI)
		}
	}
	return nil
}

// WriteDirectSpec writes spec as JSON to path, atomically: a reader sees
// the whole file or none. It sets spec.Version to DirectVersion and an
// empty EvenBatches to "off".
func WriteDirectSpec(path string, spec DirectSpec) error {
	return writeSpec(path, spec, true)
}

// WriteSplitsSpec writes the spec of a pushed feed's splits
// (SPINDLE_FEED_SPLITS) as WriteDirectSpec does, without requiring that a
// direct reader could read them: a pushed feed's splits may be Arrow
// Flight endpoints, which only the executor reads.
func WriteSplitsSpec(path string, spec DirectSpec) error {
	return writeSpec(path, spec, false)
}

func writeSpec(path string, spec DirectSpec, direct bool) (err error) {
	spec.Version = DirectVersion
	if spec.EvenBatches == "" {
		spec.EvenBatches = feed.EvenOff
	}
	if spec.Columns == nil {
		spec.Columns = []string{}
	}
	if spec.Splits == nil {
		spec.Splits = []feed.Split{}
	}
	if direct {
		if err := spec.Validate(); err != nil {
			return fmt.Errorf("write direct feed spec %s: %w", path, err)
		}
	}
	js, err := json.MarshalIndent(spec, "", "  ")
	if err != nil {
		return fmt.Errorf("write direct feed spec %s: %w", path, err)
	}
	js = append(js, '\n')
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("write direct feed spec %s: %w", path, err)
	}
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(f.Name())
		}
	}()
	if _, err := f.Write(js); err != nil {
		return fmt.Errorf("write direct feed spec %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("write direct feed spec %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write direct feed spec %s: %w", path, err)
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("write direct feed spec %s: %w", path, err)
	}
	return nil
}

// ReadDirectSpec reads and checks the direct-mode JSON at path. Unknown
// fields are ignored, so newer executors may add some; a newer version is
// refused.
func ReadDirectSpec(path string) (DirectSpec, error) {
	js, err := os.ReadFile(path)
	if err != nil {
		return DirectSpec{}, fmt.Errorf("read direct feed spec: %w", err)
	}
	var spec DirectSpec
	if err := json.Unmarshal(js, &spec); err != nil {
		return DirectSpec{}, fmt.Errorf("read direct feed spec %s: %w", path, err)
	}
	switch {
	case spec.Version == 0:
		return DirectSpec{}, fmt.Errorf("read direct feed spec %s: %w", path, errors.New("no version field"))
	case spec.Version > DirectVersion:
		return DirectSpec{}, fmt.Errorf("read direct feed spec %s: version %d is newer than this client reads (%d); upgrade spindle",
			path, spec.Version, DirectVersion)
	}
	if err := spec.Validate(); err != nil {
		return DirectSpec{}, fmt.Errorf("read direct feed spec %s: %w", path, err)
	}
	return spec, nil
}
