package feed

import (
	"context"
	"fmt"
)

// Splits group consecutive units of a file up to these sizes, so that a
// shuffled epoch has pieces to permute and a split's bytes sit on few
// HDFS blocks, without paying a file open per tiny row group.
const (
	splitMaxRows  = 1 << 20
	splitMaxBytes = 128 << 20
)

// deal gives every rank a contiguous run of rows in file order, the first
// total%ranks ranks one row more than the others, and cuts each rank's run
// into splits of whole units, the first skipping RowOffset rows of its
// first unit and the last ending inside its last unit where the run does.
func deal(ctx context.Context, files []*fileInfo, ranks int) ([][]Split, []int64, error) {
	var total int64
	for _, f := range files {
		total += f.rows
	}
	base, extra := total/int64(ranks), total%int64(ranks)
	out := make([][]Split, ranks)
	rowsPer := make([]int64, ranks)

	fi, ui := 0, 0 // the current file and unit
	var used int64 // rows of the current unit dealt already
	var cur *Split // the split being built
	var curFile *fileInfo
	var curUnits []unit
	var curBytes int64
	flush := func(r int) error {
		if cur == nil {
			return nil
		}
		if err := finishSplit(ctx, cur, curFile, curUnits); err != nil {
			return err
		}
		out[r] = append(out[r], *cur)
		cur, curFile, curUnits, curBytes = nil, nil, nil, 0
		return nil
	}
	for r := 0; r < ranks; r++ {
		need := base
		if int64(r) < extra {
			need++
		}
		rowsPer[r] = need
		for need > 0 {
			f := files[fi]
			if ui >= len(f.units) {
				fi, ui, used = fi+1, 0, 0
				continue
			}
			u := f.units[ui]
			if used >= u.rows {
				ui, used = ui+1, 0
				continue
			}
			take := min(need, u.rows-used)
			extend := cur != nil && curFile == f && used == 0 &&
				curUnits[len(curUnits)-1].index+1 == u.index &&
				cur.Rows+take <= splitMaxRows && curBytes+u.length <= splitMaxBytes
			if !extend {
				if err := flush(r); err != nil {
					return nil, nil, err
				}
				cur = &Split{URI: f.uri, Format: f.format, RowOffset: used, Partitions: f.partition}
				curFile = f
			}
			curUnits = append(curUnits, u)
			curBytes += u.length
			cur.Rows += take
			used += take
			need -= take
		}
		if err := flush(r); err != nil {
			return nil, nil, err
		}
	}
	return out, rowsPer, nil
}

// finishSplit fills in a split's units, byte range and hosts.
func finishSplit(ctx context.Context, s *Split, f *fileInfo, units []unit) error {
	if f.format == FormatFlight {
		s.Ticket, s.Hosts = f.ticket, f.hosts
		return nil
	}
	lo, hi := units[0].off, units[0].off+units[0].length
	for _, u := range units {
		switch f.format {
		case FormatParquet:
			s.RowGroups = append(s.RowGroups, u.index)
		case FormatArrow:
			s.Batches = append(s.Batches, u.index)
		}
		lo, hi = min(lo, u.off), max(hi, u.off+u.length)
	}
	if f.format == FormatCSV {
		s.Offset, s.Length, s.Line = lo, hi-lo, units[0].line
	}
	hosts, err := f.fs.Locations(ctx, f.name, lo, hi-lo)
	if err != nil {
		return fmt.Errorf("find the hosts holding %s: %w", f.uri, err)
	}
	s.Hosts = hosts
	return nil
}
