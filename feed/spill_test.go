package feed

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestCacheSpillsFlightSplits: a Flight split that outgrows the memory
// cache goes on to disk and later epochs read the same batches from
// there; a file split does not; a split larger than the spill room is not
// kept, and the error of fetching it again says why; closing removes the
// files.
func TestCacheSpillsFlightSplits(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	opens := 0
	var fail error // what the next open returns, when set
	open := func(recorded bool) (Reader, error) {
		opens++
		if fail != nil {
			return nil, fail
		}
		var recs []arrow.RecordBatch
		for i := range int64(3) {
			recs = append(recs, testRecordWith(mem, testSchema, 100*i, 100))
		}
		return &cachedReader{schema: testSchema, recs: recs}, nil
	}
	// readAll reads r to its end and returns the rows' ids.
	readAll := func(r Reader) []int64 {
		t.Helper()
		defer r.Close()
		var ids []int64
		for {
			rec, err := r.Next(t.Context())
			if errors.Is(err, io.EOF) {
				return ids
			}
			if err != nil {
				t.Fatal(err)
			}
			ids = append(ids, rec.Column(0).(*array.Int64).Int64Values()...)
			if got, want := rec.Column(2).(*array.String).Value(0), fmt.Sprintf("row %d", ids[len(ids)-int(rec.NumRows())]); got != want {
				t.Fatalf("a batch's first name is %q", got)
			}
			rec.Release()
		}
	}
	dir := filepath.Join(t.TempDir(), "spill")
	spill := newSpillStore(dir, 1<<20, mem)
	c := newSplitCache(100, nil, spill) // memory for less than one batch

	r, err := c.open(0, 300, true, open)
	if err != nil {
		t.Fatal(err)
	}
	first := readAll(r)
	if n, b := spill.stats(); n != 1 || b == 0 {
		t.Fatalf("after the first read the spill store holds %d splits, %d bytes; want the split", n, b)
	}
	file := spill.file(0)
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the spill file: %v %v", fi, err)
	}
	r, err = c.open(0, 300, true, open)
	if err != nil {
		t.Fatal(err)
	}
	again := readAll(r)
	if opens != 1 || c.hits.Load() != 1 {
		t.Fatalf("the second read opened the source %d times (hits %d), want the spill file", opens, c.hits.Load())
	}
	if len(again) != 300 || !slices.Equal(first, again) {
		t.Fatalf("read back %d rows, want the same 300", len(again))
	}

	// A file split (not spillable) outgrowing memory is read again.
	r, _ = c.open(1, 300, false, open)
	readAll(r)
	r, _ = c.open(1, 300, false, open)
	readAll(r)
	if opens != 3 || spill.file(1) != "" {
		t.Fatalf("a file split: %d opens, spilled to %q; want it read twice and not spilled", opens, spill.file(1))
	}

	// A Flight split larger than the room left is not kept; fetching it
	// again fails saying why.
	spill.limit = spill.used + 100
	r, _ = c.open(2, 300, true, open)
	readAll(r)
	if spill.file(2) != "" {
		t.Fatal("a split larger than the room left was kept")
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Fatalf("the refused split's file was left behind: %v", entries)
	}
	fail = errors.New("rank 0's pushed rows were fed already")
	_, err = c.open(2, 300, true, open)
	if err == nil || !strings.Contains(err.Error(), "fed already") || !strings.Contains(err.Error(), "spindle.feed.spillDisk") {
		t.Fatalf("fetching the refused split again: %v; want the source's error and why it was not kept", err)
	}

	// A split that fitted in memory when it was opened, but whose room
	// another split took before its end, goes to disk whole.
	fail = nil
	roomy := newSplitCache(1<<20, nil, newSpillStore(filepath.Join(t.TempDir(), "spill"), 1<<20, mem))
	r, _ = roomy.open(0, 300, true, open)
	for range 2 {
		rec, err := r.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		rec.Release()
	}
	roomy.mu.Lock()
	roomy.used = roomy.limit
	roomy.mu.Unlock()
	readAll(r)
	if n, _ := roomy.stats(); n != 0 || roomy.spill.file(0) == "" {
		t.Fatalf("a split whose memory room was taken: %d in memory, on disk at %q; want it on disk", n, roomy.spill.file(0))
	}
	before := opens
	r, _ = roomy.open(0, 300, true, open)
	if got := readAll(r); len(got) != 300 || got[0] != 0 || got[299] != 299 || opens != before {
		t.Fatalf("read back %d rows (%d opens of the source), want all 300 from disk", len(got), opens-before)
	}
	if err := roomy.close(); err != nil {
		t.Fatal(err)
	}

	if err := c.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the spill directory outlived the cache: %v", err)
	}
}

// TestSpillStoresShareADirectory: two pipelines of one rank (its own and
// one opened on a new plan) spill into the same directory; each keeps and
// reads back its own split 0, and closing one leaves the other's file.
func TestSpillStoresShareADirectory(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	dir := filepath.Join(t.TempDir(), "spill")
	opener := func(first int64) func(bool) (Reader, error) {
		return func(bool) (Reader, error) {
			return &cachedReader{schema: testSchema, recs: []arrow.RecordBatch{testRecordWith(mem, testSchema, first, 100)}}, nil
		}
	}
	firstID := func(c *splitCache, open func(bool) (Reader, error)) int64 {
		t.Helper()
		r, err := c.open(0, 100, true, open)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		rec, err := r.Next(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer rec.Release()
		for {
			if _, err := r.Next(t.Context()); errors.Is(err, io.EOF) {
				break
			}
		}
		return rec.Column(0).(*array.Int64).Value(0)
	}
	a, b := newSpillStore(dir, 1<<20, mem), newSpillStore(dir, 1<<20, mem)
	ca, cb := newSplitCache(10, nil, a), newSplitCache(10, nil, b)
	firstID(ca, opener(0))
	firstID(cb, opener(1000))
	if a.file(0) == "" || a.file(0) == b.file(0) {
		t.Fatalf("spill files %q and %q: want one of each store's", a.file(0), b.file(0))
	}
	if err := b.close(); err != nil {
		t.Fatal(err)
	}
	if got := firstID(ca, opener(-1)); got != 0 {
		t.Fatalf("the first store read back a split starting at row %d, want its own (0)", got)
	}
	if err := a.close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("the spill directory is left after both stores closed: %v", err)
	}
}
