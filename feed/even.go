package feed

import (
	"fmt"
	"slices"
	"strings"
)

// EvenMode says how ranks are made to yield the same number of batches per
// epoch, which collective training (DDP, allreduce) needs: a rank that runs
// out of batches first would wait forever for the others.
type EvenMode string

// The even-batch modes.
const (
	// EvenPad tops every rank up to the largest rank's batch count with rows
	// repeated from the rank's own data (as PyTorch's DistributedSampler
	// does), so no row is lost. Only batch counts are equalised: a rank
	// that already has the largest count is not padded, its last batch may
	// be short, and a padded rank is topped up to the largest rank's rows.
	EvenPad EvenMode = "pad"
	// EvenDrop truncates every rank to the smallest rank's count of full
	// batches; the rest of the rows are skipped this epoch.
	EvenDrop EvenMode = "drop"
	// EvenOff yields each rank's own rows, the last batch possibly short.
	EvenOff EvenMode = "off"
)

// ParseEvenMode turns a configuration value into an EvenMode; empty means
// EvenPad.
func ParseEvenMode(s string) (EvenMode, error) {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "", "pad", "true", "on":
		return EvenPad, nil
	case "drop":
		return EvenDrop, nil
	case "off", "false", "none":
		return EvenOff, nil
	}
	return "", fmt.Errorf("unknown even-batches mode %q (want pad, drop or off)", s)
}

// EvenTarget returns the number of batches of batchRows rows every rank
// yields per epoch under mode, given each rank's rows: the largest rank's
// batch count (rounded up) for EvenPad, the smallest rank's count of full
// batches for EvenDrop, and 0 (no target) for EvenOff or when batchRows is
// not positive.
func EvenTarget(rowsPerRank []int64, batchRows int, mode EvenMode) int64 {
	if batchRows <= 0 || len(rowsPerRank) == 0 {
		return 0
	}
	b := int64(batchRows)
	switch mode {
	case EvenPad, "":
		var most int64
		for _, r := range rowsPerRank {
			most = max(most, r)
		}
		return (most + b - 1) / b
	case EvenDrop:
		least := rowsPerRank[0]
		for _, r := range rowsPerRank[1:] {
			least = min(least, r)
		}
		return least / b
	}
	return 0
}

// EvenRows returns the rows rank yields per epoch under mode (see
// EvenTarget): under EvenPad its own rows when they already make the
// target's batch count, otherwise the largest rank's rows (so it yields
// the same batches, the last as short as the largest rank's); under
// EvenDrop the target's full batches; under EvenOff its own rows.
func EvenRows(rowsPerRank []int64, rank, batchRows int, mode EvenMode) int64 {
	if rank < 0 || rank >= len(rowsPerRank) {
		return 0
	}
	own := rowsPerRank[rank]
	if batchRows <= 0 {
		return own
	}
	b := int64(batchRows)
	target := EvenTarget(rowsPerRank, batchRows, mode)
	switch mode {
	case EvenPad, "":
		if (own+b-1)/b >= target {
			return own
		}
		return slices.Max(rowsPerRank)
	case EvenDrop:
		return target * b
	}
	return own
}

// CheckEven reports, as an ErrInput error, an even-batches setting under
// which ranks would feed nothing: EvenDrop with a rank holding fewer rows
// than one batch makes every rank's target zero batches.
func CheckEven(rowsPerRank []int64, batchRows int, mode EvenMode) error {
	if mode != EvenDrop || batchRows <= 0 || len(rowsPerRank) == 0 || EvenTarget(rowsPerRank, batchRows, mode) > 0 {
		return nil
	}
	var total int64
	least := 0
	for i, r := range rowsPerRank {
		total += r
		if r < rowsPerRank[least] {
			least = i
		}
	}
	if total == 0 {
		return nil
	}
	return fmt.Errorf("%w: spindle.feed.evenBatches=drop: rank %d holds %d rows, fewer than one batch of %d (--batch-rows), "+
		"so every rank would feed 0 batches; lower --batch-rows, use fewer executors, or set spindle.feed.evenBatches to pad or off",
		ErrInput, least, rowsPerRank[least], batchRows)
}
