package driverpb

import (
	"reflect"
	"testing"

	"github.com/spindle-ml/spindle/feed"
)

func TestFeedConversionsRoundTrip(t *testing.T) {
	splits := []feed.Split{
		{URI: "file:///d/a.parquet", Format: feed.FormatParquet, RowGroups: []int{0, 2}, RowOffset: 5, Rows: 100, Hosts: []string{"h1", "h2"}},
		{URI: "hdfs://nn/d/b.arrow", Format: feed.FormatArrow, Batches: []int{3}, Rows: 7},
		{URI: "file:///d/c.csv", Format: feed.FormatCSV, Offset: 10, Length: 90, Line: 2, Rows: 4},
	}
	if got := FeedSplits(SplitsFromFeed(splits)); !reflect.DeepEqual(got, splits) {
		t.Fatalf("splits round trip:\n got %+v\nwant %+v", got, splits)
	}
	for _, o := range []feed.CSVOptions{{Delimiter: '\t', Header: true}, {}} {
		if got := CSVFromFeed(o).ToFeed(); got != o {
			t.Errorf("csv options %+v came back as %+v", o, got)
		}
	}
	var none *CSVOptions
	if got := none.ToFeed(); got != (feed.CSVOptions{}) {
		t.Errorf("nil csv options read as %+v", got)
	}
}
