package hdfstest

import (
	"bytes"
	"crypto/md5"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"
)

// The battery: the third-party colinmarc/hdfs client, unchanged, against
// the test cluster.

const testBlockSize = 64 << 10

func testCluster(t *testing.T, cfg Config) *Cluster {
	t.Helper()
	if cfg.BlockSize == 0 {
		cfg.BlockSize = testBlockSize
	}
	return NewTestCluster(t, cfg)
}

func connect(t *testing.T, c *Cluster, user string) *hdfs.Client {
	t.Helper()
	cl, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: c.NameNodeAddrs(), User: user})
	if err != nil {
		t.Fatalf("connect to %s as %s: %v", c.Addr(), user, err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

func randomBytes(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func writeFile(t *testing.T, cl *hdfs.Client, name string, data []byte) {
	t.Helper()
	w, err := cl.Create(name)
	if err != nil {
		t.Fatalf("create %s: %v", name, err)
	}
	// Odd-sized writes exercise packets that end mid-chunk.
	for off := 0; off < len(data); {
		n := min(len(data)-off, 10_000+off%7919)
		if _, err := w.Write(data[off : off+n]); err != nil {
			t.Fatalf("write %s: %v", name, err)
		}
		off += n
	}
	if err := w.Close(); err != nil {
		t.Fatalf("close %s: %v", name, err)
	}
}

func readFile(t *testing.T, cl *hdfs.Client, name string) []byte {
	t.Helper()
	b, err := cl.ReadFile(name)
	if err != nil {
		t.Fatalf("read %s: %v", name, err)
	}
	return b
}

func TestClientBattery(t *testing.T) {
	c := testCluster(t, Config{ListingLimit: 5})
	su := connect(t, c, c.Superuser())
	alice := connect(t, c, "alice")
	bob := connect(t, c, "bob")
	data := randomBytes(5*testBlockSize+1234, 1)

	if err := su.MkdirAll("/data/in", 0o755); err != nil {
		t.Fatal(err)
	}
	writeFile(t, su, "/data/in/big", data)

	t.Run("stat", func(t *testing.T) {
		fi, err := su.Stat("/data/in/big")
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() != int64(len(data)) || fi.IsDir() || fi.Name() != "big" || fi.Mode().Perm() != 0o644 {
			t.Fatalf("stat: size %d dir %v name %q mode %v", fi.Size(), fi.IsDir(), fi.Name(), fi.Mode())
		}
		if owner := fi.(*hdfs.FileInfo).Owner(); owner != c.Superuser() {
			t.Fatalf("owner %q, want %q", owner, c.Superuser())
		}
		root, err := su.Stat("/")
		if err != nil || !root.IsDir() {
			t.Fatalf("stat /: %v %v", root, err)
		}
	})

	t.Run("not found", func(t *testing.T) {
		for _, op := range []func() error{
			func() error { _, err := su.Stat("/data/nope"); return err },
			func() error { _, err := su.Open("/data/nope"); return err },
			func() error { _, err := su.ReadDir("/nope"); return err },
			func() error { return su.Remove("/data/nope") },
			func() error { return su.Rename("/data/nope", "/data/nope2") },
			func() error { _, err := su.Create("/nodir/file"); return err },
			func() error { return su.Mkdir("/nodir/sub", 0o755) },
		} {
			if err := op(); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("got %v, want not exist", err)
			}
		}
	})

	t.Run("read whole and with seeks across blocks", func(t *testing.T) {
		if got := readFile(t, su, "/data/in/big"); !bytes.Equal(got, data) {
			t.Fatalf("read back %d bytes, not what was written", len(got))
		}
		f, err := su.Open("/data/in/big")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		rng := rand.New(rand.NewSource(2))
		for i := 0; i < 50; i++ {
			off := rng.Int63n(int64(len(data)))
			n := rng.Intn(3 * testBlockSize / 2)
			if i%5 == 0 { // straddle a block boundary
				off = int64((1+rng.Intn(4))*testBlockSize - 100)
				n = 300
			}
			buf := make([]byte, n)
			m, err := f.ReadAt(buf, off)
			want := data[off:min(off+int64(n), int64(len(data)))]
			if m != len(want) || (err != nil && err != io.EOF) || !bytes.Equal(buf[:m], want) {
				t.Fatalf("ReadAt(%d bytes at %d) = %d, %v; content ok %v", n, off, m, err, bytes.Equal(buf[:m], want))
			}
		}
		if _, err := f.Seek(int64(3*testBlockSize-7), io.SeekStart); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, 20)
		if _, err := io.ReadFull(f, buf); err != nil || !bytes.Equal(buf, data[3*testBlockSize-7:3*testBlockSize+13]) {
			t.Fatalf("read after seek: %v", err)
		}
		// Small reads go through the client's chunk buffer.
		for off := int64(testBlockSize - 300); off < testBlockSize+300; off += 100 {
			small := make([]byte, 100)
			if _, err := f.ReadAt(small, off); err != nil || !bytes.Equal(small, data[off:off+100]) {
				t.Fatalf("small read at %d: %v", off, err)
			}
		}
	})

	t.Run("blocks on distinct datanodes", func(t *testing.T) {
		blocks, err := c.Blocks("/data/in/big")
		if err != nil {
			t.Fatal(err)
		}
		if len(blocks) != 6 {
			t.Fatalf("%d blocks, want 6", len(blocks))
		}
		for _, b := range blocks {
			seen := map[int]bool{}
			for _, dn := range b.DataNodes {
				seen[dn] = true
			}
			if len(b.DataNodes) != 3 || len(seen) != 3 {
				t.Fatalf("block %d on datanodes %v, want 3 distinct", b.ID, b.DataNodes)
			}
		}
	})

	t.Run("empty file", func(t *testing.T) {
		if err := su.CreateEmptyFile("/data/empty"); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, su, "/data/empty"); len(got) != 0 {
			t.Fatalf("empty file read %d bytes", len(got))
		}
	})

	t.Run("exists", func(t *testing.T) {
		if _, err := su.Create("/data/in/big"); !errors.Is(err, os.ErrExist) {
			t.Fatalf("create existing: %v", err)
		}
		if err := su.Mkdir("/data/in", 0o755); !errors.Is(err, os.ErrExist) {
			t.Fatalf("mkdir existing: %v", err)
		}
		if err := su.MkdirAll("/data/in", 0o755); err != nil {
			t.Fatalf("mkdir -p existing: %v", err)
		}
	})

	t.Run("list with paging", func(t *testing.T) {
		if err := su.MkdirAll("/data/list", 0o755); err != nil {
			t.Fatal(err)
		}
		var want []string
		for i := 0; i < 12; i++ {
			name := string(rune('a'+11-i)) + "-file"
			writeFile(t, su, "/data/list/"+name, []byte(name))
			want = append([]string{name}, want...)
		}
		infos, err := su.ReadDir("/data/list")
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, fi := range infos {
			got = append(got, fi.Name())
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Fatalf("listing %v, want %v", got, want)
		}
		f, _ := su.Open("/data/list")
		page, err := f.Readdir(7)
		if err != nil || len(page) != 7 {
			t.Fatalf("first page: %d entries, %v", len(page), err)
		}
		page, err = f.Readdir(7)
		if err != nil || len(page) != 5 || page[0].Name() != want[7] {
			t.Fatalf("second page: %d entries, %v", len(page), err)
		}
		if calls := c.Stats().NameNodeCalls["getListing"]; calls < 3 {
			t.Fatalf("%d getListing calls for 12 entries in pages of 5", calls)
		}
	})

	t.Run("rename", func(t *testing.T) {
		writeFile(t, su, "/data/r1", []byte("one"))
		writeFile(t, su, "/data/r2", []byte("two"))
		if err := su.Rename("/data/r1", "/data/r3"); err != nil {
			t.Fatal(err)
		}
		if _, err := su.Stat("/data/r1"); !errors.Is(err, os.ErrNotExist) {
			t.Fatalf("source still there: %v", err)
		}
		// colinmarc renames with overwrite: the target is replaced.
		if err := su.Rename("/data/r3", "/data/r2"); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, su, "/data/r2"); string(got) != "one" {
			t.Fatalf("after rename over: %q", got)
		}
		if err := su.MkdirAll("/data/dir1/sub", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := su.Rename("/data/dir1", "/data/dir2"); err != nil {
			t.Fatal(err)
		}
		if fi, err := su.Stat("/data/dir2/sub"); err != nil || !fi.IsDir() {
			t.Fatalf("renamed directory: %v", err)
		}
	})

	t.Run("delete frees replicas", func(t *testing.T) {
		writeFile(t, su, "/data/del", randomBytes(2*testBlockSize, 3))
		blocks, _ := c.Blocks("/data/del")
		if err := su.Remove("/data/del"); err != nil {
			t.Fatal(err)
		}
		for _, dn := range c.DataNodes() {
			for _, b := range blocks {
				matches, _ := filepath.Glob(filepath.Join(dn.Dir, "finalized", "blk_"+strconv.FormatUint(b.ID, 10)+"*"))
				if len(matches) > 0 {
					t.Fatalf("replica files %v remain after delete", matches)
				}
			}
		}
		if err := su.MkdirAll("/data/full/x", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := su.Remove("/data/full"); !errors.Is(err, syscall.ENOTEMPTY) {
			t.Fatalf("remove non-empty dir: %v", err)
		}
		if err := su.RemoveAll("/data/full"); err != nil {
			t.Fatal(err)
		}
	})

	t.Run("permission denied", func(t *testing.T) {
		if err := su.Mkdir("/private", 0o700); err != nil {
			t.Fatal(err)
		}
		writeFile(t, su, "/private/secret", []byte("secret"))
		writeFile(t, su, "/tmp/su-only", []byte("mine"))
		if err := su.Chmod("/tmp/su-only", 0o600); err != nil {
			t.Fatal(err)
		}
		denied := []struct {
			name string
			op   func() error
		}{
			{"stat through a closed directory", func() error { _, err := alice.Stat("/private/secret"); return err }},
			{"list a closed directory", func() error { _, err := alice.ReadDir("/private"); return err }},
			{"create in the root", func() error { _, err := alice.Create("/alice-file"); return err }},
			{"mkdir in the root", func() error { return alice.Mkdir("/alice-dir", 0o755) }},
			{"chmod another's file", func() error { return alice.Chmod("/tmp/su-only", 0o777) }},
			{"delete from the root", func() error { return alice.Remove("/data") }},
			{"read an unreadable file", func() error {
				f, err := alice.Open("/tmp/su-only")
				if err != nil {
					return err
				}
				_, err = io.ReadAll(f)
				if errors.Is(interpret(err), os.ErrPermission) {
					return os.ErrPermission
				}
				return err
			}},
		}
		for _, d := range denied {
			if err := d.op(); !errors.Is(err, os.ErrPermission) {
				t.Errorf("%s: got %v, want permission denied", d.name, err)
			}
		}
		// /tmp is sticky: alice's file is hers alone.
		writeFile(t, alice, "/tmp/alice-file", []byte("alice"))
		if err := bob.Remove("/tmp/alice-file"); !errors.Is(err, os.ErrPermission) {
			t.Errorf("bob deleting alice's file in sticky /tmp: %v", err)
		}
		if err := alice.Remove("/tmp/alice-file"); err != nil {
			t.Errorf("alice deleting her file: %v", err)
		}
		// Ownership and mode changes take effect.
		if err := su.Chown("/private", "alice", ""); err != nil {
			t.Fatal(err)
		}
		if _, err := alice.ReadDir("/private"); err != nil {
			t.Errorf("alice listing her directory: %v", err)
		}
		if err := alice.Chown("/private", "bob", ""); !errors.Is(err, os.ErrPermission) {
			t.Errorf("non-superuser chown: %v", err)
		}
	})

	t.Run("checksum", func(t *testing.T) {
		f, err := su.Open("/data/in/big")
		if err != nil {
			t.Fatal(err)
		}
		got, err := f.Checksum()
		if err != nil {
			t.Fatal(err)
		}
		if want := md5md5crc(data, testBlockSize); !bytes.Equal(got, want) {
			t.Fatalf("checksum %x, want %x", got, want)
		}
	})

	t.Run("server defaults, fs stats, content summary, times", func(t *testing.T) {
		d, err := su.ServerDefaults()
		if err != nil || d.BlockSize != testBlockSize || d.Replication != 3 || d.BytesPerChecksum != 512 {
			t.Fatalf("defaults %+v, %v", d, err)
		}
		st, err := su.StatFs()
		if err != nil || st.Used < uint64(3*len(data)) {
			t.Fatalf("statfs %+v, %v", st, err)
		}
		cs, err := su.GetContentSummary("/data/in")
		if err != nil || cs.Size() != int64(len(data)) || cs.FileCount() != 1 {
			t.Fatalf("content summary %+v, %v", cs, err)
		}
		mt := time.Unix(1700000000, 0)
		if err := su.Chtimes("/data/in/big", mt, mt); err != nil {
			t.Fatal(err)
		}
		if fi, _ := su.Stat("/data/in/big"); !fi.ModTime().Equal(mt) {
			t.Fatalf("mtime %v, want %v", fi.ModTime(), mt)
		}
	})

	t.Run("concurrent readers", func(t *testing.T) {
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for i := 0; i < 4; i++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				cl, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{c.Addr()}, User: "reader"})
				if err != nil {
					errs <- err
					return
				}
				defer cl.Close()
				b, err := cl.ReadFile("/data/in/big")
				if err == nil && !bytes.Equal(b, data) {
					err = errors.New("content differs")
				}
				errs <- err
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// interpret maps a raw namenode error (colinmarc returns them unwrapped from
// reads) to the os error its exception class stands for.
func interpret(err error) error {
	var he hdfs.Error
	if errors.As(err, &he) && he.Exception() == classAccessControl {
		return os.ErrPermission
	}
	return err
}

// md5md5crc computes HDFS's MD5-of-MD5-of-CRC32C file checksum the way the
// client combines block checksums.
func md5md5crc(data []byte, blockSize int) []byte {
	table := crc32.MakeTable(crc32.Castagnoli)
	outer := md5.New()
	total, padded := 0, 32
	for off := 0; off < len(data); off += blockSize {
		blk := data[off:min(off+blockSize, len(data))]
		var sums []byte
		for c := 0; c < len(blk); c += 512 {
			sums = binary.BigEndian.AppendUint32(sums, crc32.Checksum(blk[c:min(c+512, len(blk))], table))
		}
		d := md5.Sum(sums)
		outer.Write(d[:])
		total += len(d)
		if padded < total {
			padded *= 2
		}
	}
	outer.Write(make([]byte, padded-total))
	return outer.Sum(nil)
}
