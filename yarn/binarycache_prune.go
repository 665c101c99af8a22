package yarn

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"time"
)

// prune deletes, best effort, the cache's entries beyond the keep newest
// (by upload time, the modification time of the digest's directory),
// except current, those uploaded within the grace period, and those the
// staging directory of any of the user's applications names: an
// application that may still start containers (a restarted gang, a new
// attempt) needs its binary until it ends and its staging directory goes.
// When the staging directories cannot be listed, nothing is deleted.
func (c *binaryCache) prune(ctx context.Context, st *stager, current string) {
	old, err := c.evictable(ctx, current)
	if err != nil || len(old) == 0 {
		if err != nil {
			c.log.Warn("binary cache not pruned", "dir", st.uri(c.dir), "err", err)
		}
		return
	}
	live, err := liveDigests(ctx, st)
	if err != nil {
		c.log.Warn("binary cache not pruned: cannot tell which binaries running applications use", "err", err)
		return
	}
	for _, d := range old {
		if live[d] {
			continue
		}
		if err := removeTree(ctx, c.fs, path.Join(c.dir, d)); err != nil {
			c.log.Warn("evict a cached spindle binary", "digest", d, "err", err)
			continue
		}
		c.log.Info("evicted a cached spindle binary", "digest", d)
	}
}

// evictable lists the digests beyond the keep newest, older than the
// grace period, other than current.
func (c *binaryCache) evictable(ctx context.Context, current string) ([]string, error) {
	entries, err := c.fs.ReadDir(ctx, c.dir)
	if err != nil {
		return nil, fmt.Errorf("list the binary cache: %w", err)
	}
	var digestDirs []fs.FileInfo
	for _, e := range entries {
		if e.IsDir() && isDigest(e.Name()) {
			digestDirs = append(digestDirs, e)
		}
	}
	sort.SliceStable(digestDirs, func(i, j int) bool { return digestDirs[i].ModTime().After(digestDirs[j].ModTime()) })
	var out []string
	for i, e := range digestDirs {
		if i < c.keep || e.Name() == current || time.Since(e.ModTime()) < c.grace {
			continue
		}
		out = append(out, e.Name())
	}
	return out, nil
}

// liveDigests returns the digests that the user's staging directories
// (one per application not yet ended, or left by one that crashed) name.
func liveDigests(ctx context.Context, st *stager) (map[string]bool, error) {
	root := path.Dir(st.dir)
	apps, err := st.fs.ReadDir(ctx, root)
	if err != nil {
		return nil, fmt.Errorf("list the staging directories %s: %w", st.uri(root), err)
	}
	out := map[string]bool{}
	for _, app := range apps {
		if !app.IsDir() {
			continue
		}
		names, err := st.fs.ReadDir(ctx, path.Join(root, app.Name(), binaryMarkers))
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("list the binaries of staging directory %s: %w", st.uri(path.Join(root, app.Name())), err)
		}
		for _, n := range names {
			out[n.Name()] = true
		}
	}
	return out, nil
}

// isDigest says whether name is a SHA-256 in hex.
func isDigest(name string) bool {
	b, err := hex.DecodeString(name)
	return err == nil && len(b) == 32
}
