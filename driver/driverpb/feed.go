package driverpb

import "github.com/spindle-ml/spindle/feed"

// SplitsFromFeed returns the messages of planned splits.
func SplitsFromFeed(ss []feed.Split) []*Split {
	out := make([]*Split, len(ss))
	for i, s := range ss {
		out[i] = &Split{
			Uri: s.URI, Format: string(s.Format), RowGroups: int32s(s.RowGroups), Batches: int32s(s.Batches),
			Offset: s.Offset, Length: s.Length, Line: s.Line, RowOffset: s.RowOffset, Rows: s.Rows, Hosts: s.Hosts,
			Partitions: s.Partitions, Ticket: s.Ticket,
		}
	}
	return out
}

// FeedSplits returns the splits that split messages describe.
func FeedSplits(ss []*Split) []feed.Split {
	out := make([]feed.Split, len(ss))
	for i, s := range ss {
		out[i] = feed.Split{
			URI: s.GetUri(), Format: feed.Format(s.GetFormat()), RowGroups: ints(s.GetRowGroups()), Batches: ints(s.GetBatches()),
			Offset: s.GetOffset(), Length: s.GetLength(), Line: s.GetLine(), RowOffset: s.GetRowOffset(), Rows: s.GetRows(),
			Hosts: s.GetHosts(), Partitions: s.GetPartitions(), Ticket: s.GetTicket(),
		}
	}
	return out
}

// CSVFromFeed returns the message of CSV options.
func CSVFromFeed(o feed.CSVOptions) *CSVOptions {
	return &CSVOptions{Delimiter: o.Delimiter, Header: o.Header}
}

// ToFeed returns the CSV options the message describes.
func (o *CSVOptions) ToFeed() feed.CSVOptions {
	return feed.CSVOptions{Delimiter: o.GetDelimiter(), Header: o.GetHeader()}
}

func int32s(v []int) []int32 {
	if v == nil {
		return nil
	}
	out := make([]int32, len(v))
	for i, x := range v {
		out[i] = int32(x)
	}
	return out
}

func ints(v []int32) []int {
	if v == nil {
		return nil
	}
	out := make([]int, len(v))
	for i, x := range v {
		out[i] = int(x)
	}
	return out
}

// SegmentsFromFeed returns the messages of segments.
func SegmentsFromFeed(ss []feed.Segment) []*Segment {
	out := make([]*Segment, len(ss))
	for i, s := range ss {
		out[i] = &Segment{Splits: SplitsFromFeed(s.Splits), Rank: int32(s.Rank), TargetBatches: s.TargetBatches,
			EpochRows: s.EpochRows, RowStart: s.RowStart, RowEnd: s.RowEnd}
	}
	return out
}

// FeedSegments returns the segments that segment messages describe.
func FeedSegments(ss []*Segment) []feed.Segment {
	out := make([]feed.Segment, len(ss))
	for i, s := range ss {
		out[i] = feed.Segment{Splits: FeedSplits(s.GetSplits()), Rank: int(s.GetRank()), TargetBatches: s.GetTargetBatches(),
			EpochRows: s.GetEpochRows(), RowStart: s.GetRowStart(), RowEnd: s.GetRowEnd()}
	}
	return out
}
