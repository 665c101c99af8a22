package feed

import (
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
type footerCache struct {
	mu     sync.Mutex
	m      map[footerKey]*metadata.FileMetaData
	hits   atomic.Int64
	misses atomic.Int64
}

type footerKey struct {
	uri  string
	size int64
}

func newFooterCache() *footerCache {
	return &footerCache{m: map[footerKey]*metadata.FileMetaData{}}
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
