package plan

import (
	"context"
	"fmt"

	"github.com/spindle-ml/spindle/feed"
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
// first feed.Unit and the last ending inside its last feed.Unit where the run does.
func deal(ctx context.Context, files []*fileInfo, ranks int) ([][]feed.Split, []int64, error) {
	var total int64
	for _, f := range files {
		total += f.rows
	}
	base, extra := total/int64(ranks), total%int64(ranks)
	out := make([][]feed.Split, ranks)
	rowsPer := make([]int64, ranks)

	fi, ui := 0, 0      // the current file and feed.Unit
	var used int64      // rows of the current feed.Unit dealt already
	var cur *feed.Split // the split being built
	var curFile *fileInfo
	var curUnits []feed.Unit
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
			if used >= u.Rows {
				ui, used = ui+1, 0
				continue
			}
			take := min(need, u.Rows-used)
			extend := cur != nil && curFile == f && used == 0 &&
				curUnits[len(curUnits)-1].Index+1 == u.Index &&
				cur.Rows+take <= splitMaxRows && curBytes+u.Length <= splitMaxBytes
			if !extend {
				if err := flush(r); err != nil {
					return nil, nil, err
				}
				cur = &feed.Split{URI: f.uri, Format: f.format, RowOffset: used, Partitions: f.partition}
				curFile = f
			}
			curUnits = append(curUnits, u)
			curBytes += u.Length
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
func finishSplit(ctx context.Context, s *feed.Split, f *fileInfo, units []feed.Unit) error {
	if f.format == feed.FormatFlight {
		s.Ticket, s.Hosts = f.ticket, f.hosts
		return nil
	}
	lo, hi := units[0].Off, units[0].Off+units[0].Length
	for _, u := range units {
		switch f.format {
		case feed.FormatParquet:
			s.RowGroups = append(s.RowGroups, u.Index)
		case feed.FormatArrow:
			s.Batches = append(s.Batches, u.Index)
		}
		lo, hi = min(lo, u.Off), max(hi, u.Off+u.Length)
	}
	if f.format == feed.FormatCSV {
		s.Offset, s.Length, s.Line = lo, hi-lo, units[0].Line
	}
	hosts, err := f.fs.Locations(ctx, f.name, lo, hi-lo)
	if err != nil {
		return fmt.Errorf("find the hosts holding %s: %w", f.uri, err)
	}
	s.Hosts = hosts
	return nil
}
