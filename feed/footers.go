package feed

import (
	"slices"
	"sync"
	"sync/atomic"

	"github.com/apache/arrow-go/v18/parquet/metadata"
)

// footerCacheFiles bounds the Parquet footers a footerCache keeps; when
// it is full it starts over.
const footerCacheFiles = 256

// footerCache keeps the parsed footers of the Parquet files a pipeline
// reads, so that a file cut into several splits has its footer read and
// parsed once rather than once per split and epoch: with many row groups
// the footer is large and parsing it is a good part of the decode. A
// file is known by its URI and size.
//
// Footers are parsed lean, without their column chunks' statistics, and
// a file the rank reads only part of has its footer thinned to the row
// groups the rank's splits name (feedpq.FooterIndex.Thin): each executor of a
// job parses its share of a large footer, not all of it.
type footerCache struct {
	mu     sync.Mutex
	m      map[footerKey]*metadata.FileMetaData
	hits   atomic.Int64
	misses atomic.Int64

	// rowGroups is, per file, the row groups the rank's splits name; a
	// file one of them reads whole has none.
	rowGroups map[string][]int
}

type footerKey struct {
	uri  string
	size int64
}

// newFooterCache returns a cache for the footers of the files of splits.
func newFooterCache(splits []Split) *footerCache {
	c := &footerCache{m: map[footerKey]*metadata.FileMetaData{}, rowGroups: map[string][]int{}}
	whole := map[string]bool{}
	for _, s := range splits {
		if len(s.RowGroups) == 0 {
			whole[s.URI] = true
		}
		c.rowGroups[s.URI] = append(c.rowGroups[s.URI], s.RowGroups...)
	}
	for uri, rgs := range c.rowGroups {
		if whole[uri] {
			delete(c.rowGroups, uri)
			continue
		}
		slices.Sort(rgs)
		c.rowGroups[uri] = slices.Compact(rgs)
	}
	return c
}

// rowGroupsOf returns the row groups the rank reads of the file uri, in
// order, or nil for all of them (or no cache).
func (c *footerCache) rowGroupsOf(uri string) []int {
	if c == nil {
		return nil
	}
	return c.rowGroups[uri]
}

// get returns the footer of the file, or nil. A nil cache has none.
func (c *footerCache) get(k footerKey) *metadata.FileMetaData {
	if c == nil {
		return nil
	}
	c.mu.Lock()
	md := c.m[k]
	c.mu.Unlock()
	if md != nil {
		c.hits.Add(1)
	} else {
		c.misses.Add(1)
	}
	return md
}

// put keeps the footer of the file.
func (c *footerCache) put(k footerKey, md *metadata.FileMetaData) {
	if c == nil || md == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.m) >= footerCacheFiles {
		clear(c.m)
	}
	c.m[k] = md
}
