package yarn

import (
	"bytes"
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// cacheSite is a test HDFS with a resolver, and local binaries to cache.
type cacheSite struct {
	hdfs *hdfstest.Cluster
	res  *fsys.Resolver
	fs   fsys.FS
	user string
	dir  string // local directory of the binaries
}

func newCacheSite(t *testing.T) *cacheSite {
	t.Helper()
	c := hdfstest.NewTestCluster(t, hdfstest.Config{DataNodes: 1, BlockSize: 1 << 20})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, User: c.Superuser()})
	t.Cleanup(func() { r.Close() })
	f, _, err := r.Resolve(context.Background(), c.URI()+"/")
	if err != nil {
		t.Fatal(err)
	}
	return &cacheSite{hdfs: c, res: r, fs: f, user: c.Superuser(), dir: t.TempDir()}
}

// binary writes a local binary of n random bytes.
func (s *cacheSite) binary(t *testing.T, name string, n int) localBinary {
	t.Helper()
	b := make([]byte, n)
	rand.Read(b)
	p := filepath.Join(s.dir, name)
	if err := os.WriteFile(p, b, 0o755); err != nil {
		t.Fatal(err)
	}
	lb, err := hashBinary(p)
	if err != nil {
		t.Fatal(err)
	}
	return lb
}

// stager makes the staging directory of application app.
func (s *cacheSite) stager(t *testing.T, app string) *stager {
	t.Helper()
	st, err := newStager(context.Background(), s.res, s.hdfs.URI(), s.user, app)
	if err != nil {
		t.Fatal(err)
	}
	return st
}

func (s *cacheSite) cache(st *stager, keep int) *binaryCache {
	return newBinaryCache(st, "", s.user, keep, slog.New(slog.DiscardHandler))
}

// sameBytes checks that the cached file holds the local binary's bytes.
func (s *cacheSite) sameBytes(t *testing.T, res Resource, lb localBinary) {
	t.Helper()
	f, err := s.fs.Open(context.Background(), res.File)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	got, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(lb.path)
	if !bytes.Equal(got, want) {
		t.Fatalf("%s holds %d bytes that are not the binary's %d", res.File, len(got), len(want))
	}
}

// TestBinaryCache: on a test HDFS, the second application finds the
// binary the first uploaded (same file, same modification time, PRIVATE),
// owner-only; a cached copy of the wrong size is replaced, not used; a
// half-written upload left beside the entry is never used.
func TestBinaryCache(t *testing.T) {
	s := newCacheSite(t)
	ctx := context.Background()
	lb := s.binary(t, "spindle", 3<<20+17)

	st1 := s.stager(t, "application_1_0001")
	first, uploaded, err := s.cache(st1, 3).stage(ctx, st1, lb)
	if err != nil || !uploaded {
		t.Fatalf("first stage: uploaded %v, %v", uploaded, err)
	}
	want := path.Join("/user", s.user, ".spindle", "cache", lb.digest, "spindle")
	if first.File != want || first.Size != lb.size || first.Visibility != visibilityPrivate {
		t.Fatalf("first stage gave %+v, want %s, %d bytes, PRIVATE", first, want, lb.size)
	}
	if v := first.Proto().GetVisibility(); v != pb.LocalResourceVisibilityProto_PRIVATE {
		t.Fatalf("the LocalResource's visibility is %v", v)
	}
	s.sameBytes(t, first, lb)
	for name, mode := range map[string]fs.FileMode{path.Dir(path.Dir(want)): 0o700, path.Dir(want): 0o700, want: 0o500} {
		if fi, err := s.fs.Stat(ctx, name); err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %v (%v), want %v", name, fi.Mode().Perm(), err, mode)
		}
	}

	t.Run("second application uploads nothing", func(t *testing.T) {
		st2 := s.stager(t, "application_1_0002")
		second, uploaded, err := s.cache(st2, 3).stage(ctx, st2, lb)
		if err != nil || uploaded {
			t.Fatalf("second stage: uploaded %v, %v", uploaded, err)
		}
		if second != first {
			t.Fatalf("second stage gave %+v, want the first's %+v", second, first)
		}
	})

	t.Run("wrong size is replaced", func(t *testing.T) {
		if err := fsys.WriteAtomic(ctx, s.fs, want, strings.NewReader("truncated")); err != nil {
			t.Fatal(err)
		}
		st3 := s.stager(t, "application_1_0003")
		got, uploaded, err := s.cache(st3, 3).stage(ctx, st3, lb)
		if err != nil || !uploaded || got.Size != lb.size {
			t.Fatalf("stage over a truncated copy: %+v, uploaded %v, %v", got, uploaded, err)
		}
		s.sameBytes(t, got, lb)
	})

	t.Run("half-written upload is not used", func(t *testing.T) {
		other := s.binary(t, "spindle-other", 2<<20)
		entry := path.Join("/user", s.user, ".spindle", "cache", other.digest, "spindle")
		// What a gateway killed mid-upload leaves behind.
		if err := s.fs.MkdirAll(ctx, path.Dir(entry)); err != nil {
			t.Fatal(err)
		}
		if err := fsys.WriteAtomic(ctx, s.fs, path.Join(path.Dir(entry), ".spindle.upload-0123456789abcdef"), strings.NewReader("half")); err != nil {
			t.Fatal(err)
		}
		st4 := s.stager(t, "application_1_0004")
		got, uploaded, err := s.cache(st4, 3).stage(ctx, st4, other)
		if err != nil || !uploaded || got.File != entry {
			t.Fatalf("stage beside a half-written upload: %+v, uploaded %v, %v", got, uploaded, err)
		}
		s.sameBytes(t, got, other)
	})
}

// TestBinaryCacheConcurrentSubmits: gateways uploading the same new
// binary at once all succeed and all describe the same file, whose
// modification time no later upload changes.
func TestBinaryCacheConcurrentSubmits(t *testing.T) {
	s := newCacheSite(t)
	ctx := context.Background()
	lb := s.binary(t, "spindle", 2<<20+3)
	const n = 4
	stagers := make([]*stager, n)
	for i := range stagers {
		stagers[i] = s.stager(t, fmt.Sprintf("application_1_%04d", i+1))
	}
	results := make([]Resource, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i], _, errs[i] = s.cache(stagers[i], 3).stage(ctx, stagers[i], lb)
		}()
	}
	wg.Wait()
	for i := range n {
		if errs[i] != nil {
			t.Fatalf("gateway %d: %v", i, errs[i])
		}
		if results[i] != results[0] {
			t.Fatalf("gateway %d described %+v, gateway 0 %+v", i, results[i], results[0])
		}
	}
	fi, err := s.fs.Stat(ctx, results[0].File)
	if err != nil || fi.ModTime().UnixMilli() != results[0].Timestamp {
		t.Fatalf("the cached file changed after the gateways described it: %v, %v", fi, err)
	}
	s.sameBytes(t, results[0], lb)
	left, err := s.fs.ReadDir(ctx, path.Dir(results[0].File))
	if err != nil || len(left) != 1 {
		t.Fatalf("the digest's directory holds %d files (%v), want the binary only", len(left), err)
	}
}

// TestBinaryCachePrune: with keep 1, an upload evicts the older binaries
// but the one a live application's staging directory names.
func TestBinaryCachePrune(t *testing.T) {
	s := newCacheSite(t)
	ctx := context.Background()
	var bins []localBinary
	for i := range 3 {
		lb := s.binary(t, fmt.Sprintf("spindle-%d", i), 1<<20+i)
		st := s.stager(t, fmt.Sprintf("application_1_%04d", i+1))
		c := s.cache(st, 10)
		if _, _, err := c.stage(ctx, st, lb); err != nil {
			t.Fatal(err)
		}
		bins = append(bins, lb)
		if i != 1 {
			// Application 2 still runs; the others have ended.
			if err := st.removeAll(ctx); err != nil {
				t.Fatal(err)
			}
		}
	}
	st := s.stager(t, "application_1_0004")
	c := s.cache(st, 1)
	c.grace = 0
	newest := s.binary(t, "spindle-new", 1<<20+9)
	if _, _, err := c.stage(ctx, st, newest); err != nil {
		t.Fatal(err)
	}
	entries, err := s.fs.ReadDir(ctx, c.dir)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, e := range entries {
		got = append(got, e.Name())
	}
	want := []string{bins[1].digest, newest.digest}
	if strings.Join(sortedCopy(got), ",") != strings.Join(sortedCopy(want), ",") {
		t.Fatalf("the cache holds %v, want the live application's %s and the new %s", got, bins[1].digest, newest.digest)
	}
}

// TestBinaryCacheOff: off stages nothing through the cache, and the
// configuration refuses a relative directory naming its key.
func TestBinaryCacheOff(t *testing.T) {
	if c := newBinaryCache(&stager{}, BinaryCacheOff, "u", 3, nil); c != nil {
		t.Fatalf("off made a cache in %s", c.dir)
	}
	cfg := DefaultConfig()
	cfg.BinaryCache = "cache"
	if err := cfg.Validate(); err == nil || !strings.Contains(err.Error(), "spindle.yarn.binaryCache") {
		t.Fatalf("a relative cache directory: %v", err)
	}
}

func sortedCopy(s []string) []string {
	out := append([]string(nil), s...)
	slices.Sort(out)
	return out
}

// TestBinaryCacheOfAnotherUserIsNotUsed: a cache directory another user
// made (spindle.yarn.binaryCache naming a shared place) is not trusted,
// even with an entry of the right size: whoever owns it could have put
// any program there.
func TestBinaryCacheOfAnotherUserIsNotUsed(t *testing.T) {
	s := newCacheSite(t)
	ctx := context.Background()
	for _, dir := range []string{"/shared", "/user"} { // mallory makes her own there
		if err := s.fs.MkdirAll(ctx, dir); err != nil {
			t.Fatal(err)
		}
		if err := s.fs.(fsys.Chmoder).Chmod(ctx, dir, 0o777); err != nil {
			t.Fatal(err)
		}
	}
	conf := t.TempDir()
	if err := s.hdfs.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	other := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, User: "mallory"})
	t.Cleanup(func() { other.Close() })
	lb := s.binary(t, "spindle", 1<<20)

	theirs, err := newStager(ctx, other, s.hdfs.URI(), "mallory", "application_1_0001")
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := newBinaryCache(theirs, "/shared/cache", "mallory", 3, slog.New(slog.DiscardHandler)).stage(ctx, theirs, lb); err != nil {
		t.Fatalf("mallory's upload: %v", err)
	}
	ours := s.stager(t, "application_1_0002")
	_, _, err = newBinaryCache(ours, "/shared/cache", s.user, 3, slog.New(slog.DiscardHandler)).stage(ctx, ours, lb)
	if err == nil || !strings.Contains(err.Error(), "belongs to mallory") {
		t.Fatalf("staging from mallory's cache: %v, want it refused as mallory's", err)
	}
}
