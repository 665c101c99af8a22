package parquet

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/file"

	"github.com/spindle-ml/spindle/feed/parquet/pqtest"
)

// TestChunkPagesGivesBackSpentWindow reads a column chunk's pages and
// checks when the window goes back to the pool: a compressed chunk's
// large window as soon as the pages in it are decompressed out of it, and
// a page larger than the window after it; a small window, or one whose
// uncompressed page is used where it lies, stays.
func TestChunkPagesGivesBackSpentWindow(t *testing.T) {
	const rows = 120_000 // a float64 chunk of about 520 kB compressed
	for _, tt := range []struct {
		name     string
		codec    compress.Compression
		pageSize int
		window   int
		want     string // when the window is given back: after the "last" page, "each" page, or "never"
	}{
		{"one window", compress.Codecs.Snappy, 2048, 1 << 20, "last"},
		{"windows cutting pages", compress.Codecs.Snappy, 2048, spentWindowMin, "last"},
		{"small windows", compress.Codecs.Snappy, 2048, 16 << 10, "never"},
		{"pages over the window", compress.Codecs.Snappy, 8192, 1000, "each"},
		{"uncompressed", compress.Codecs.Uncompressed, 2048, 1 << 20, "never"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "chunk.parquet")
			pqtest.WriteFlat(t, path, rows, rows, tt.pageSize, tt.codec, false, false, false)
			f, err := os.Open(path)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			pf, err := file.NewParquetReader(f)
			if err != nil {
				t.Fatal(err)
			}
			defer pf.Close()
			cc, err := pf.MetaData().RowGroup(0).ColumnChunk(1) // float64
			if err != nil {
				t.Fatal(err)
			}

			pool := &freeCounter{Allocator: memory.NewGoAllocator()}
			c := newChunkPages(f, tt.window, pool)
			defer c.release()
			if err := c.reset(ChunkStart(cc), cc.TotalCompressedSize(), cc.Compression()); err != nil {
				t.Fatal(err)
			}
			var pages, returned int
			var values int64
			var lastReturned bool
			for {
				h, data, err := c.next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatalf("page %d: %v", pages, err)
				}
				pages++
				values += int64(h.numValues)
				if len(data) != int(h.uncompressedSize) {
					t.Fatalf("page %d: %d bytes, its header says %d", pages, len(data), h.uncompressedSize)
				}
				lastReturned = c.winLen == 0
				if lastReturned {
					returned++
				} else if tt.want == "last" && c.pos >= c.winAt+int64(c.winLen) {
					t.Fatalf("page %d: the window is spent and still held", pages)
				}
			}
			if values != rows || pages < 10 {
				t.Fatalf("read %d values in %d pages, want %d in many", values, pages, rows)
			}
			switch tt.want {
			case "last":
				if returned != 1 || !lastReturned {
					t.Errorf("the window was given back after %d of %d pages (the last: %v), want after the last only", returned, pages, lastReturned)
				}
				if window := min(int64(tt.window), cc.TotalCompressedSize()); pool.freed < window {
					t.Errorf("%d bytes were given back by the chunk's end, want the window's %d", pool.freed, window)
				}
			case "each":
				// All but the last, which is small enough for the window.
				if returned != pages-1 || lastReturned {
					t.Errorf("the window was given back after %d of %d pages (the last: %v), want after each one larger than it", returned, pages, lastReturned)
				}
			case "never":
				if returned != 0 {
					t.Errorf("the window was given back after %d of %d pages, want never", returned, pages)
				}
			}
		})
	}
}
