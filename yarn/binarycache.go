package yarn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/fsys"
)

// Log messages of the binary cache, which tests and operators count.
const (
	// MsgBinaryCached says a job used a binary the cache already held.
	MsgBinaryCached = "using the cached spindle binary"
	// MsgBinaryUploaded says a job uploaded its binary into the cache.
	MsgBinaryUploaded = "uploaded the spindle binary to the cache"
)

const (
	// BinaryCacheOff, as Config.BinaryCache, stages the binary with each
	// application instead.
	BinaryCacheOff = "off"
	// binaryCacheGrace protects a cache entry uploaded this recently from
	// eviction: a gateway may be between finding it and naming it in its
	// staging directory.
	binaryCacheGrace = time.Hour
	// binaryMarkers is the directory of a staging directory whose
	// entries (empty directories) name the digests its application uses.
	binaryMarkers = "binary"
	// defaultBinaryCacheKeep is how many digests the cache keeps when
	// Config.BinaryCacheKeep is zero.
	defaultBinaryCacheKeep = 3
)

// binaryCache keeps spindle binaries on the cluster's default file system
// by content, <dir>/<sha256>/spindle, owner-only: a job whose binary is
// there uploads nothing, and because the file and its modification time
// stay the same from job to job, a NodeManager localizes it once per user
// (PRIVATE visibility) and reuses its copy for later applications.
type binaryCache struct {
	fs    fsys.FS
	dir   string // path inside fs
	user  string // who must own the cache's directories and files
	keep  int
	grace time.Duration
	log   *slog.Logger
}

// newBinaryCache returns the cache setting names (empty: the user's
// /user/<user>/.spindle/cache) on st's file system, or nil when setting
// is off.
func newBinaryCache(st *stager, setting, user string, keep int, log *slog.Logger) *binaryCache {
	if setting == BinaryCacheOff {
		return nil
	}
	dir := setting
	if dir == "" {
		dir = path.Join("/user", user, ".spindle", "cache")
	}
	if keep <= 0 {
		keep = defaultBinaryCacheKeep
	}
	return &binaryCache{fs: st.fs, dir: path.Clean(dir), user: user, keep: keep, grace: binaryCacheGrace, log: log}
}

// localBinary is a local file to cache, with its size and SHA-256.
type localBinary struct {
	path   string
	size   int64
	digest string
}

type digestKey struct {
	path  string
	size  int64
	mtime time.Time
}

// digests remembers the binaries this process has hashed: a session that
// submits several jobs hashes its binary once.
var digests struct {
	sync.Mutex
	m map[digestKey]string
}

// hashBinary hashes the file at name, or returns the digest this process
// computed for it before (same size and modification time).
func hashBinary(name string) (localBinary, error) {
	f, err := os.Open(name)
	if err != nil {
		return localBinary{}, fmt.Errorf("hash the spindle binary %s: %w", name, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return localBinary{}, fmt.Errorf("hash the spindle binary %s: %w", name, err)
	}
	key := digestKey{path: name, size: st.Size(), mtime: st.ModTime()}
	digests.Lock()
	defer digests.Unlock()
	if d, ok := digests.m[key]; ok {
		return localBinary{path: name, size: key.size, digest: d}, nil
	}
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return localBinary{}, fmt.Errorf("hash the spindle binary %s: %w", name, err)
	}
	d := hex.EncodeToString(h.Sum(nil))
	if digests.m == nil {
		digests.m = map[digestKey]string{}
	}
	digests.m[key] = d
	return localBinary{path: name, size: key.size, digest: d}, nil
}

// stage returns the cached copy of bin as a PRIVATE LocalResource for the
// application st stages, uploading it first when the cache lacks it or
// holds a copy of the wrong size; uploaded says whether it did.
func (c *binaryCache) stage(ctx context.Context, st *stager, bin localBinary) (res Resource, uploaded bool, err error) {
	// The application names its digest before it looks the entry up: an
	// eviction that lists the names after this keeps the entry.
	if err := st.fs.MkdirAll(ctx, path.Join(st.dir, binaryMarkers, bin.digest)); err != nil {
		return Resource{}, false, fmt.Errorf("name the binary's digest in %s: %w", st.base, err)
	}
	entry := path.Join(c.dir, bin.digest, "spindle")
	fi, err := c.fs.Stat(ctx, entry)
	switch {
	case err == nil && fi.Mode().IsRegular() && fi.Size() == bin.size:
		if err := c.owned(ctx, entry, fi); err != nil {
			return Resource{}, false, err
		}
		return st.resource(entry, fi, visibilityPrivate), false, nil
	case err == nil:
		c.log.Warn("replacing a cached spindle binary of the wrong size", "file", st.uri(entry), "bytes", fi.Size(), "want", bin.size)
	case !errors.Is(err, fs.ErrNotExist):
		return Resource{}, false, fmt.Errorf("look up the cached binary %s: %w", st.uri(entry), err)
	default:
		fi = nil
	}
	if fi, err = c.upload(ctx, bin, entry, fi); err != nil {
		return Resource{}, false, err
	}
	c.prune(ctx, st, bin.digest)
	return st.resource(entry, fi, visibilityPrivate), true, nil
}

// upload copies bin to a temporary name beside entry and renames it into
// place unless another gateway did first, whose copy is then used: a file
// at entry is always complete, and once a job has described it (size and
// modification time) it is never replaced while it has the right size.
// bad is the entry of the wrong size found there, to remove first.
func (c *binaryCache) upload(ctx context.Context, bin localBinary, entry string, bad fs.FileInfo) (fs.FileInfo, error) {
	nr, ok := c.fs.(fsys.NoReplaceRenamer)
	if !ok {
		return nil, fmt.Errorf("the file system of %s cannot rename without replacing", c.dir)
	}
	dir := path.Dir(entry)
	if err := c.mkdirPrivate(ctx, dir); err != nil {
		return nil, err
	}
	var rnd [8]byte
	rand.Read(rnd[:])
	tmp := path.Join(dir, ".spindle.upload-"+hex.EncodeToString(rnd[:]))
	if err := c.copyTo(ctx, bin, tmp); err != nil {
		return nil, err
	}
	defer c.fs.Remove(context.WithoutCancel(ctx), tmp) // gone after the rename; left by a failure
	if bad != nil {
		// Remove the bad copy only if it is still the one found: another
		// gateway may have replaced it with a good one meanwhile.
		if cur, err := c.fs.Stat(ctx, entry); err == nil && cur.Size() == bad.Size() && cur.ModTime().Equal(bad.ModTime()) {
			if err := c.fs.Remove(ctx, entry); err != nil && !errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("remove the cached binary of the wrong size %s: %w", entry, err)
			}
		}
	}
	err := nr.RenameNoReplace(ctx, tmp, entry)
	if err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("publish the cached binary %s: %w", entry, err)
	}
	fi, serr := c.fs.Stat(ctx, entry)
	if serr != nil {
		return nil, fmt.Errorf("stat the cached binary %s: %w", entry, serr)
	}
	if fi.Size() != bin.size {
		return nil, fmt.Errorf("the cached binary %s has %d bytes, want %d: another gateway wrote it meanwhile", entry, fi.Size(), bin.size)
	}
	return fi, nil
}

// copyTo writes bin's bytes to name, owner-only.
func (c *binaryCache) copyTo(ctx context.Context, bin localBinary, name string) error {
	in, err := os.Open(bin.path)
	if err != nil {
		return fmt.Errorf("upload %s to the binary cache: %w", bin.path, err)
	}
	defer in.Close()
	if err := fsys.WriteAtomic(ctx, c.fs, name, in); err != nil {
		return fmt.Errorf("upload %s to the binary cache: %w", bin.path, err)
	}
	return c.chmod(ctx, name, 0o500)
}

// mkdirPrivate makes dir, a digest's directory, and makes it and the
// cache's directory owner-only.
func (c *binaryCache) mkdirPrivate(ctx context.Context, dir string) error {
	if err := c.fs.MkdirAll(ctx, dir); err != nil {
		return fmt.Errorf("create the binary cache directory %s: %w", dir, err)
	}
	for _, d := range []string{c.dir, dir} {
		if err := c.chmod(ctx, d, 0o700); err != nil {
			return err
		}
	}
	return nil
}

func (c *binaryCache) chmod(ctx context.Context, name string, mode fs.FileMode) error {
	ch, ok := c.fs.(fsys.Chmoder)
	if !ok {
		return nil
	}
	if err := ch.Chmod(ctx, name, mode); err != nil {
		return fmt.Errorf("make %s owner-only: %w", name, err)
	}
	return nil
}

// owned checks that the user owns the entry (whose FileInfo the lookup
// already has), the digest's directory and the cache's directory, on a
// file system that records owners: the cache is trusted by its size
// alone, which only holds while nobody else can have written to it
// (spindle.yarn.binaryCache may name a directory another user made).
func (c *binaryCache) owned(ctx context.Context, entryName string, entry fs.FileInfo) error {
	if err := c.ownedBy(entryName, entry); err != nil {
		return err
	}
	for _, dir := range []string{path.Dir(entryName), c.dir} {
		fi, err := c.fs.Stat(ctx, dir)
		if err != nil {
			return fmt.Errorf("check the owner of %s: %w", dir, err)
		}
		if err := c.ownedBy(dir, fi); err != nil {
			return err
		}
	}
	return nil
}

// ownedBy checks fi's owner where the file system records one (HDFS; a
// local file system does not).
func (c *binaryCache) ownedBy(name string, fi fs.FileInfo) error {
	o, ok := fi.(interface{ Owner() string })
	if !ok || o.Owner() == c.user {
		return nil
	}
	return fmt.Errorf("%s belongs to %s, not %s: the binary cache must be the submitting user's own", name, o.Owner(), c.user)
}
