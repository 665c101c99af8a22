package feed

import (
	"fmt"
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
	// does), so every batch is full and no row is lost.
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
