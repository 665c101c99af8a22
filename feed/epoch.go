package feed

import (
	"cmp"
	"slices"
)

// The epoch rules: which rows a rank yields in an epoch, in what order and
// in which batches. The pipeline follows them, and so does the Python
// package's direct-mode reader (python/spindle/_direct.py), which reads
// the splits itself: for the same seed both yield the same rows in the
// same batches (docs/feed-protocol.md spells the rules out, a test
// compares the two).
//
//  1. The rank's splits are read in their planned order or, shuffling, in
//     the order of permutation(epochKey(seed, epoch, rank, streamSplits)).
//  2. With a row limit (EpochRowLimit: even batches), the splits are read
//     over again in the same order until the limit, and cut there.
//  3. Shuffling with a buffer of W > 1 rows, the row stream is cut into
//     windows of exactly W rows (the last may be shorter) and window w is
//     reordered by permutation(windowKey(rowsKey, w)), where rowsKey is
//     epochKey(seed, epoch, rank, streamRows).
//  4. The rows are cut into batches of BatchRows; the last may be short.
//
// A permutation of n by key puts index i at the position of
// splitmix(key ^ i) among those n values (ascending; splitmix is a
// bijection, so there are no ties). It costs a sort, which numpy does as
// fast as Go, where a Fisher-Yates shuffle on a Go random source would have
// to be replayed one step at a time in Python.

// epochKey returns the key of one random stream of one epoch of one rank.
func epochKey(seed int64, epoch, rank int, stream uint64) uint64 {
	return splitmix(splitmix(uint64(seed)) ^ splitmix(uint64(epoch)<<32^uint64(uint32(rank))^stream<<60^0x5350494e444c45))
}

// windowKey returns the key of window w of an epoch's row stream.
func windowKey(rowsKey uint64, w int64) uint64 {
	return splitmix(rowsKey + uint64(w))
}

// permutation fills idx with the permutation of 0..len(idx)-1 that key
// gives (see the epoch rules). keys is scratch space, grown as needed and
// returned for reuse.
func permutation(idx []int64, key uint64, keys []uint64) []uint64 {
	n := len(idx)
	if cap(keys) < n {
		keys = make([]uint64, n)
	}
	keys = keys[:n]
	for i := range idx {
		idx[i] = int64(i)
		keys[i] = splitmix(key ^ uint64(i))
	}
	slices.SortFunc(idx, func(a, b int64) int { return cmp.Compare(keys[a], keys[b]) })
	return keys
}

// EpochRowLimit returns how many rows a rank holding rows rows yields per
// epoch under the even-batch rules, or -1 when it yields its own rows
// once (EvenOff). targetBatches is the batch count every rank yields (0:
// work it out from this rank's rows alone, as for a single rank);
// epochRows is EvenRows for this rank (0: targetBatches full batches).
// Under EvenPad only the count of batches is promised, so the limit may
// stop short of the last batch's end.
func EpochRowLimit(rows int64, batchRows int, mode EvenMode, targetBatches, epochRows int64) int64 {
	if mode == EvenOff || batchRows <= 0 {
		return -1
	}
	target := targetBatches
	if target == 0 {
		target = EvenTarget([]int64{rows}, batchRows, mode)
		epochRows = EvenRows([]int64{rows}, 0, batchRows, mode)
	}
	b := int64(batchRows)
	limit := target * b
	if mode != EvenDrop && epochRows > (target-1)*b && epochRows < limit {
		limit = epochRows
	}
	return limit
}
