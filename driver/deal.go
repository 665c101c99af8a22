package driver

import "github.com/spindle-ml/spindle/feed"

// Dealing the rest of an epoch: when the world changes inside an epoch,
// the rows its lost or old ranks had left are dealt among the new ranks.
// A gang restart deals every old rank's rest (elasticStart); going on in
// place with input is to deal only the lost rank's rest among the running
// survivors (docs/reliability.md, "Going on in place"). Both read a
// rank's rest the same way and deal it by the same rule.

// rankRest is the rest of epoch in old rank r's stream, in the world of
// deal dl: its segments of the epoch (its own split plan, or what dl
// dealt it of an earlier world's epoch) without the first batches it
// finished.
func (d *Driver) rankRest(dl *dealt, r, epoch int, batches int64) []feed.Segment {
	segs := []feed.Segment{d.baseSegment(dl.w, r)}
	if dl.restEpoch == epoch {
		segs = dl.rest[r]
	}
	return sliceSegments(segs, batches*int64(d.cfg.BatchRows))
}

// dealRest deals the stream rest among n ranks in whole batches of
// batchRows, in order, the odd rows to the first ranks. pad is the batch
// count every rank is padded to (the even-batch rules' padding: ranks
// with fewer batches repeat their first), or 0 when even batches are
// off.
func dealRest(rest []feed.Segment, n, batchRows int, even feed.EvenMode) (parts [][]feed.Segment, pad int64) {
	var total int64
	for _, s := range rest {
		total += s.Rows()
	}
	b := int64(batchRows)
	q := total / (int64(n) * b)
	left := total - q*int64(n)*b
	if even != feed.EvenOff {
		pad = q
		if left > 0 {
			pad++
		}
	}
	parts = make([][]feed.Segment, n)
	var at int64
	for j := range n {
		rows := q*b + min(b, max(0, left-int64(j)*b))
		parts[j] = takeSegments(rest, at, at+rows)
		at += rows
	}
	return parts, pad
}
