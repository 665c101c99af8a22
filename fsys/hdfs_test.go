package fsys

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// TestMain checks the package's tests (local and HDFS) leak no goroutines:
// every HDFS client and file is closed.
func TestMain(m *testing.M) {
	// gokrb5's service side (the secure test HDFS) keeps one replay cache
	// per process, swept by a goroutine it never stops.
	goleak.VerifyTestMain(hadoopMain{m}, goleak.IgnoreAnyFunction("github.com/jcmturner/gokrb5/v8/service.GetReplayCache.func1.1"),
		// The same goroutine, as the race detector's build names it.
		goleak.IgnoreAnyFunction("github.com/jcmturner/gokrb5/v8/service.VerifyAPREQ.GetReplayCache.func1.1"),
		// colinmarc/hdfs leaves a broken write pipeline's ack reader
		// waiting for packets that never come (one per pipeline lost).
		goleak.IgnoreAnyFunction("github.com/colinmarc/hdfs/v2/internal/transfer.(*blockWriteStream).ackPackets"))
}

// hadoopMain runs the tests and then stops the real Hadoop cluster that
// TestRealHDFS may have started, before the leak check.
type hadoopMain struct{ m *testing.M }

func (h hadoopMain) Run() int { return hadooptest.Main(h.m) }

const testBlock = 64 << 10

func testData(n int, seed int64) []byte {
	b := make([]byte, n)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(60*time.Second))
	t.Cleanup(cancel)
	return ctx
}

// startHDFS starts a test HDFS and writes its HADOOP_CONF_DIR.
func startHDFS(t *testing.T, cfg hdfstest.Config) (*hdfstest.Cluster, string) {
	t.Helper()
	if cfg.BlockSize == 0 {
		cfg.BlockSize = testBlock
	}
	c := hdfstest.NewTestCluster(t, cfg)
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	return c, conf
}

func writeConf(t *testing.T, core, hdfsSite map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, props := range map[string]map[string]string{"core-site.xml": core, "hdfs-site.xml": hdfsSite} {
		var b strings.Builder
		b.WriteString("<?xml version=\"1.0\"?>\n<configuration>\n")
		for k, v := range props {
			fmt.Fprintf(&b, "  <property><name>%s</name><value>%s</value></property>\n", k, v)
		}
		b.WriteString("</configuration>\n")
		if err := os.WriteFile(filepath.Join(dir, name), []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func TestHDFSConfig(t *testing.T) {
	ha := writeConf(t, map[string]string{"fs.defaultFS": "hdfs://prod"}, map[string]string{
		"dfs.nameservices":                  "prod,other",
		"dfs.ha.namenodes.prod":             "nn1, nn2",
		"dfs.namenode.rpc-address.prod.nn1": "m1.example:8020",
		"dfs.namenode.rpc-address.prod.nn2": "m2.example:8020",
		"dfs.namenode.rpc-address.other":    "o.example:9000",
	})
	plain := writeConf(t, map[string]string{"fs.defaultFS": "hdfs://nn.example:9000"}, nil)
	broken := writeConf(t, nil, map[string]string{"dfs.ha.namenodes.prod": "nn1"})
	kerberos := writeConf(t, map[string]string{"fs.defaultFS": "hdfs://nn:8020", "hadoop.security.authentication": "kerberos"}, nil)
	notHDFS := writeConf(t, map[string]string{"fs.defaultFS": "file:///"}, nil)
	empty := t.TempDir()
	krb5Conf := filepath.Join(empty, "krb5.conf")
	if err := os.WriteFile(krb5Conf, []byte("[libdefaults]\n default_realm = NOWHERE.TEST\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KRB5_CONFIG", krb5Conf)
	t.Setenv("KRB5CCNAME", filepath.Join(empty, "no-ticket-cache"))

	for _, tc := range []struct {
		name, dir, authority string
		want                 []string
		wantErr              string
	}{
		{"default HA nameservice", ha, "", []string{"m1.example:8020", "m2.example:8020"}, ""},
		{"named HA nameservice", ha, "prod", []string{"m1.example:8020", "m2.example:8020"}, ""},
		{"plain nameservice", ha, "other", []string{"o.example:9000"}, ""},
		{"explicit host and port", ha, "h.example:1234", []string{"h.example:1234"}, ""},
		{"host without port", empty, "h.example", []string{"h.example:8020"}, ""},
		{"default host", plain, "", []string{"nn.example:9000"}, ""},
		{"no defaultFS", empty, "", nil, "needs fs.defaultFS"},
		{"missing namenode address", broken, "prod", nil, "dfs.namenode.rpc-address.prod.nn1 is not set"},
		{"kerberos without a ticket", kerberos, "", nil, "run kinit"},
		{"defaultFS not hdfs", notHDFS, "", nil, `fs.defaultFS "file:///"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl, err := hdfsClusterFor(tc.authority, Options{HadoopConfDir: tc.dir, User: "u"})
			if tc.wantErr != "" {
				if !errors.Is(err, ErrHadoopConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(cl.addrs, tc.want) {
				t.Fatalf("namenodes %v, want %v", cl.addrs, tc.want)
			}
		})
	}

	t.Run("user", func(t *testing.T) {
		t.Setenv("HADOOP_USER_NAME", "from-env")
		for _, tc := range []struct{ opt, want string }{{"explicit", "explicit"}, {"", "from-env"}} {
			cl, err := hdfsClusterFor("h:1", Options{HadoopConfDir: empty, User: tc.opt})
			if err != nil || cl.user != tc.want {
				t.Fatalf("user %v %v, want %s", cl, err, tc.want)
			}
		}
	})
}

// testFS runs the file system contract against an HDFS directory base (a
// URI); it passes against the test HDFS and against a real cluster.
func testFS(t *testing.T, res *Resolver, base string) {
	ctx := testCtx(t)
	fsys, dir, err := res.Resolve(ctx, base)
	if err != nil {
		t.Fatal(err)
	}
	if err := fsys.MkdirAll(ctx, dir+"/in/part"); err != nil {
		t.Fatal(err)
	}
	data := testData(5*testBlock+777, 1)
	write := func(name string, b []byte) {
		t.Helper()
		af, err := fsys.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		for off := 0; off < len(b); off += 10007 {
			if _, err := af.Write(b[off:min(off+10007, len(b))]); err != nil {
				t.Fatal(err)
			}
		}
		if err := af.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	write(dir+"/in/part/a.bin", data)
	write(dir+"/in/part/b.bin", []byte("bee"))
	write(dir+"/in/c.txt", []byte("sea"))

	t.Run("stat and readdir", func(t *testing.T) {
		fi, err := fsys.Stat(ctx, dir+"/in/part/a.bin")
		if err != nil || fi.Size() != int64(len(data)) || fi.IsDir() {
			t.Fatalf("stat: %v %v", fi, err)
		}
		infos, err := fsys.ReadDir(ctx, dir+"/in")
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, fi := range infos {
			names = append(names, fi.Name())
		}
		if strings.Join(names, ",") != "c.txt,part" {
			t.Fatalf("readdir: %v", names)
		}
	})

	t.Run("glob", func(t *testing.T) {
		for _, tc := range []struct {
			pattern string
			want    []string
		}{
			{"/in/part/*.bin", []string{"/in/part/a.bin", "/in/part/b.bin"}},
			{"/in/*/a.*", []string{"/in/part/a.bin"}},
			{"/in/*", []string{"/in/c.txt", "/in/part"}},
			{"/in/c.txt", []string{"/in/c.txt"}},
			{"/in/missing", nil},
			{"/nope/*", nil},
		} {
			got, err := fsys.Glob(ctx, dir+tc.pattern)
			if err != nil {
				t.Fatalf("glob %s: %v", tc.pattern, err)
			}
			var want []string
			for _, w := range tc.want {
				want = append(want, dir+w)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("glob %s = %v, want %v", tc.pattern, got, want)
			}
		}
	})

	t.Run("random and concurrent reads", func(t *testing.T) {
		f, err := fsys.Open(ctx, dir+"/in/part/a.bin")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if f.Size() != int64(len(data)) {
			t.Fatalf("size %d", f.Size())
		}
		var wg sync.WaitGroup
		errs := make(chan error, 8)
		for g := 0; g < 8; g++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				rng := rand.New(rand.NewSource(int64(g)))
				for i := 0; i < 20; i++ {
					off := rng.Int63n(int64(len(data)))
					buf := make([]byte, rng.Intn(2*testBlock))
					n, err := f.ReadAt(buf, off)
					want := data[off:min(off+int64(len(buf)), int64(len(data)))]
					if (err != nil && !(err == io.EOF && n < len(buf))) || !bytes.Equal(buf[:n], want) || n != len(want) {
						errs <- fmt.Errorf("ReadAt(%d at %d) = %d, %v", len(buf), off, n, err)
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		all, err := io.ReadAll(f)
		if err != nil || !bytes.Equal(all, data) {
			t.Fatalf("sequential read: %d bytes, %v", len(all), err)
		}
		if _, err := f.Seek(-10, io.SeekEnd); err != nil {
			t.Fatal(err)
		}
		end, _ := io.ReadAll(f)
		if !bytes.Equal(end, data[len(data)-10:]) {
			t.Fatalf("read after seek from end: %q", end)
		}
	})

	t.Run("atomic create", func(t *testing.T) {
		name := dir + "/out/ckpt"
		if err := fsys.MkdirAll(ctx, dir+"/out"); err != nil {
			t.Fatal(err)
		}
		af, err := fsys.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		af.Write([]byte("partial"))
		if _, err := fsys.Stat(ctx, name); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("final name visible before commit: %v", err)
		}
		if err := af.Abort(); err != nil {
			t.Fatal(err)
		}
		if infos, _ := fsys.ReadDir(ctx, dir+"/out"); len(infos) != 0 {
			t.Fatalf("abort left %d files", len(infos))
		}
		write(name, []byte("v1"))
		write(name, []byte("version two"))
		f, err := fsys.Open(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(f)
		f.Close()
		if string(got) != "version two" {
			t.Fatalf("after replacing commit: %q", got)
		}
		if infos, _ := fsys.ReadDir(ctx, dir+"/out"); len(infos) != 1 {
			t.Fatalf("commit left %d files, want 1", len(infos))
		}
		if _, err := fsys.CreateAtomic(ctx, dir+"/no-such-dir/x"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("create in a missing directory: %v", err)
		}
	})

	t.Run("rename and remove", func(t *testing.T) {
		if err := fsys.Rename(ctx, dir+"/in/c.txt", dir+"/in/d.txt"); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(ctx, dir+"/in/d.txt"); err != nil {
			t.Fatal(err)
		}
		if err := fsys.Remove(ctx, dir+"/in/part"); err == nil {
			t.Fatal("removed a non-empty directory")
		}
		if err := fsys.Remove(ctx, dir+"/in/d.txt"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("remove twice: %v", err)
		}
	})

	t.Run("rename without replacing", func(t *testing.T) {
		nr := fsys.(NoReplaceRenamer)
		write(dir+"/in/nr-first", []byte("first"))
		write(dir+"/in/nr-second", []byte("second"))
		if err := nr.RenameNoReplace(ctx, dir+"/in/nr-second", dir+"/in/nr-first"); !errors.Is(err, fs.ErrExist) {
			t.Fatalf("rename onto an existing file: %v, want fs.ErrExist", err)
		}
		if fi, err := fsys.Stat(ctx, dir+"/in/nr-first"); err != nil || fi.Size() != int64(len("first")) {
			t.Fatalf("the existing file was touched: %v, %v", fi, err)
		}
		if err := nr.RenameNoReplace(ctx, dir+"/in/nr-second", dir+"/in/nr-third"); err != nil {
			t.Fatal(err)
		}
		if _, err := fsys.Stat(ctx, dir+"/in/nr-second"); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("the source is still there: %v", err)
		}
		for _, name := range []string{"nr-first", "nr-third"} {
			if err := fsys.Remove(ctx, dir+"/in/"+name); err != nil {
				t.Fatal(err)
			}
		}
	})

	t.Run("not found names the URI and the user", func(t *testing.T) {
		_, err := fsys.Open(ctx, dir+"/missing")
		var pe *fs.PathError
		if !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &pe) || !strings.HasPrefix(pe.Path, "hdfs://") ||
			!strings.Contains(err.Error(), dir+"/missing") || !strings.Contains(err.Error(), "HDFS user") {
			t.Fatalf("open missing: %v", err)
		}
	})

	t.Run("locations", func(t *testing.T) {
		hosts, err := fsys.Locations(ctx, dir+"/in/part/a.bin", 0, int64(len(data)))
		if err != nil || len(hosts) == 0 {
			t.Fatalf("locations: %v, %v", hosts, err)
		}
	})
}

func TestHDFS(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{DataNodeHostnames: []string{"dn0.test", "dn1.test", "dn2.test", "dn3.test"}, DataNodes: 4, Replication: 2})
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	t.Cleanup(func() { res.Close() })
	t.Run("contract via fs.defaultFS", func(t *testing.T) { testFS(t, res, "hdfs:///tmp/suite") })
	t.Run("contract via explicit authority", func(t *testing.T) { testFS(t, res, "hdfs://"+c.Addr()+"/tmp/suite2") })

	ctx := testCtx(t)
	fsys, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}

	t.Run("locations follow the blocks", func(t *testing.T) {
		blocks, err := c.Blocks("/tmp/suite/in/part/a.bin")
		if err != nil {
			t.Fatal(err)
		}
		b := blocks[2]
		want := map[string]bool{}
		for _, dn := range b.DataNodes {
			want[c.DataNodes()[dn].Hostname] = true
		}
		// A range inside one block is held by exactly that block's hosts.
		hosts, err := fsys.Locations(ctx, "/tmp/suite/in/part/a.bin", b.Offset+10, 100)
		if err != nil {
			t.Fatal(err)
		}
		if len(hosts) != len(want) {
			t.Fatalf("hosts %v, want %v", hosts, want)
		}
		for _, h := range hosts {
			if !want[h] {
				t.Fatalf("hosts %v, want %v", hosts, want)
			}
		}
		// A range mostly in block 3 puts block 3's hosts first.
		hosts, _ = fsys.Locations(ctx, "/tmp/suite/in/part/a.bin", blocks[3].Offset-10, testBlock)
		first := c.DataNodes()[blocks[3].DataNodes[0]].Hostname
		if hosts[0] != first && hosts[1] != first {
			t.Fatalf("hosts %v do not start with block 3's %v", hosts, blocks[3].DataNodes)
		}
		if _, err := fsys.Locations(ctx, "/tmp/nope", 0, 1); !errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("locations of a missing file: %v", err)
		}
	})

	t.Run("permission denied names the user", func(t *testing.T) {
		if err := fsys.MkdirAll(ctx, "/secret"); err != nil {
			t.Fatal(err)
		}
		af, _ := fsys.CreateAtomic(ctx, "/secret/f")
		af.Write([]byte("x"))
		if err := af.Commit(); err != nil {
			t.Fatal(err)
		}
		other := NewResolver(Options{HadoopConfDir: conf, User: "mallory"})
		defer other.Close()
		ofs, _, err := other.Resolve(ctx, "hdfs:///")
		if err != nil {
			t.Fatal(err)
		}
		for name, op := range map[string]func() error{
			"create": func() error { _, err := ofs.CreateAtomic(ctx, "/secret/g"); return err },
			"mkdir":  func() error { return ofs.MkdirAll(ctx, "/secret/d") },
			"remove": func() error { return ofs.Remove(ctx, "/secret/f") },
		} {
			err := op()
			if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "mallory") || !strings.Contains(err.Error(), "/secret") {
				t.Errorf("%s: %v, want permission denied naming mallory and the path", name, err)
			}
		}
		// A file only its owner may read fails at the first read.
		if err := fsys.(*hdfsFS).cur.c.Chmod("/secret/f", 0o600); err != nil {
			t.Fatal(err)
		}
		f, err := ofs.Open(ctx, "/secret/f")
		if err == nil {
			_, err = f.ReadAt(make([]byte, 1), 0)
			f.Close()
		}
		if !errors.Is(err, fs.ErrPermission) || !strings.Contains(err.Error(), "hdfs://") {
			t.Errorf("read an unreadable file: %v", err)
		}
	})
}

func TestHDFSSequentialReadsReuseTheStream(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{})
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	ctx := testCtx(t)
	fsys, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	data := testData(4*testBlock, 2)
	af, _ := fsys.CreateAtomic(ctx, "/tmp/seq")
	af.Write(data)
	if err := af.Commit(); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Open(ctx, "/tmp/seq")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	c.ResetStats()
	// Chunks read back to back, as Parquet reads the column chunks of a row
	// group: one datanode op per block, not one per chunk.
	buf := make([]byte, testBlock/8)
	for off := int64(0); off < int64(len(data)); off += int64(len(buf)) {
		if _, err := f.ReadAt(buf, off); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(buf, data[off:off+int64(len(buf))]) {
			t.Fatalf("content at %d", off)
		}
	}
	if ops := c.Stats().ReadOps; ops != 4 {
		t.Fatalf("%d datanode reads for 32 back-to-back chunks of 4 blocks, want 4", ops)
	}
}

func TestHDFSFailures(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{})
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	ctx := testCtx(t)
	fsys, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	data := testData(3*testBlock, 3)
	for _, name := range []string{"/tmp/kill", "/tmp/corrupt"} {
		af, _ := fsys.CreateAtomic(ctx, name)
		af.Write(data)
		if err := af.Commit(); err != nil {
			t.Fatal(err)
		}
	}

	t.Run("datanode dies mid-read", func(t *testing.T) {
		f, err := fsys.Open(ctx, "/tmp/kill")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		got := make([]byte, len(data))
		half := testBlock + testBlock/2
		if _, err := io.ReadFull(f, got[:half]); err != nil {
			t.Fatal(err)
		}
		blocks, _ := c.Blocks("/tmp/kill")
		dn := blocks[1].DataNodes[0]
		if err := c.KillDataNode(dn); err != nil {
			t.Fatal(err)
		}
		defer c.RestartDataNode(dn)
		if _, err := io.ReadFull(f, got[half:]); err != nil {
			t.Fatalf("read after datanode %d died: %v", dn, err)
		}
		if !bytes.Equal(got, data) {
			t.Fatal("content differs")
		}
	})

	t.Run("every replica corrupt", func(t *testing.T) {
		if err := c.CorruptBlock("/tmp/corrupt", 1); err != nil {
			t.Fatal(err)
		}
		f, err := fsys.Open(ctx, "/tmp/corrupt")
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		_, err = f.ReadAt(make([]byte, testBlock), testBlock)
		msg := fmt.Sprint(err)
		if err == nil || !strings.Contains(msg, "hdfs://") || !strings.Contains(msg, "/tmp/corrupt") ||
			!strings.Contains(msg, fmt.Sprintf("offset %d", testBlock)) || !strings.Contains(msg, "checksum") {
			t.Fatalf("read of a corrupt block: %v, want an error naming the file, offset and checksum", err)
		}
	})
}

func TestHDFSNamenodeUnreachable(t *testing.T) {
	// A namenode that accepts connections and hangs up at once.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var conns atomic.Int32
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			conns.Add(1)
			c.Close()
		}
	}()
	hangUp := ln.Addr().String()

	closed, _ := net.Listen("tcp", "127.0.0.1:0")
	refused := closed.Addr().String()
	closed.Close()

	for _, tc := range []struct{ name, addr string }{{"hangs up", hangUp}, {"refuses", refused}} {
		t.Run(tc.name, func(t *testing.T) {
			res := NewResolver(Options{HadoopConfDir: t.TempDir(), User: "u"})
			defer res.Close()
			start := time.Now()
			_, _, err := res.Resolve(testCtx(t), "hdfs://"+tc.addr+"/x")
			if !errors.Is(err, ErrNamenodeUnreachable) || !strings.Contains(err.Error(), tc.addr) {
				t.Fatalf("error %v, want ErrNamenodeUnreachable naming %s", err, tc.addr)
			}
			t.Logf("gave up after %v: %v", time.Since(start), err)
		})
	}
	ln.Close()
	<-done
	if n := conns.Load(); n != hdfsConnectAttempts {
		t.Fatalf("%d connection attempts, want %d", n, hdfsConnectAttempts)
	}
}

func TestHDFSHAFailover(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{NameNodes: 3})
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	ctx := testCtx(t)
	fsys, _, err := res.Resolve(ctx, "hdfs:///tmp")
	if err != nil {
		t.Fatal(err)
	}
	for i, name := range []string{"/tmp/a", "/tmp/b", "/tmp/c"} {
		if err := c.Failover(i); err != nil {
			t.Fatal(err)
		}
		af, err := fsys.CreateAtomic(ctx, name)
		if err != nil {
			t.Fatal(err)
		}
		af.Write([]byte(name))
		if err := af.Commit(); err != nil {
			t.Fatalf("commit with namenode %d active: %v", i, err)
		}
		if _, err := fsys.Locations(ctx, name, 0, 1); err != nil {
			t.Fatalf("locations with namenode %d active: %v", i, err)
		}
	}
	got, err := fsys.Glob(ctx, "/tmp/?")
	if err != nil || len(got) != 3 {
		t.Fatalf("glob after failovers: %v %v", got, err)
	}
}

// TestRealHDFS runs the contract against real Apache Hadoop: the mini
// cluster of the real-Hadoop tier (make test-hadoop), or a cluster of your
// own with SPINDLE_TEST_REAL_HDFS=1 and HADOOP_CONF_DIR (and
// HADOOP_USER_NAME when the login user cannot write SPINDLE_TEST_HDFS_DIR,
// default /tmp).
func TestRealHDFS(t *testing.T) {
	if os.Getenv("SPINDLE_TEST_REAL_HDFS") != "1" || os.Getenv("HADOOP_CONF_DIR") == "" {
		t.Setenv("HADOOP_CONF_DIR", hadooptest.Shared(t).ConfDir)
	}
	root := os.Getenv("SPINDLE_TEST_HDFS_DIR")
	if root == "" {
		root = "/tmp"
	}
	base := fmt.Sprintf("hdfs://%s/spindle-test-%d", root, time.Now().UnixNano())
	res := NewResolver(Options{})
	t.Cleanup(func() {
		// The resolver closes after the removal, which reuses its client.
		defer res.Close()
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
		defer cancel()
		if fsys, dir, err := res.Resolve(ctx, base); err == nil {
			fsys.(*hdfsFS).cur.c.RemoveAll(dir)
		}
	})
	testFS(t, res, base)
}

// Options.HDFSIOTimeout bounds each read on a datanode stream: with a
// timeout that has passed before the datanode answers, reading fails with
// os.ErrDeadlineExceeded instead of waiting.
func TestHDFSIOTimeout(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{})
	ctx := testCtx(t)
	writer := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer writer.Close()
	wfs, _, err := writer.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	af, err := wfs.CreateAtomic(ctx, "/tmp/timeout")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write(testData(testBlock, 3)); err != nil {
		t.Fatal(err)
	}
	if err := af.Commit(); err != nil {
		t.Fatal(err)
	}
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser(), HDFSIOTimeout: time.Nanosecond})
	defer res.Close()
	rfs, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	f, err := rfs.Open(ctx, "/tmp/timeout")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(make([]byte, 1024), 0); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("a read with a passed deadline: %v, want os.ErrDeadlineExceeded", err)
	}
}
