package fsys

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// TestDataTransferProtection: on an HDFS whose datanodes require the SASL
// handshake of dfs.data.transfer.protection, at each level, Spindle reads
// and writes files of several blocks through replication pipelines, its
// datanode connections authenticated with the block tokens the namenode
// hands out, and protected at the level the site files name; a client
// whose site files lack the setting is turned away.
func TestDataTransferProtection(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuv"), 3*testBlock/32+100)
	for _, level := range []string{"authentication", "integrity", "privacy", "privacy+aes"} {
		t.Run(level, func(t *testing.T) {
			cfg := hdfstest.Config{DataTransferProtection: level}
			if l, ok := strings.CutSuffix(level, "+aes"); ok {
				cfg.DataTransferProtection, cfg.DataTransferCipherSuites = l, "AES/CTR/NoPadding"
			}
			cluster, conf := startHDFS(t, cfg)
			ctx := testCtx(t)
			r := NewResolver(Options{HadoopConfDir: conf})
			defer r.Close()
			fs, _, err := r.Resolve(ctx, "hdfs:///")
			if err != nil {
				t.Fatal(err)
			}
			w, err := fs.CreateAtomic(ctx, "/blocks.bin")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := w.Write(data); err != nil {
				t.Fatal(err)
			}
			if err := w.Commit(); err != nil {
				t.Fatal(err)
			}
			f, err := fs.Open(ctx, "/blocks.bin")
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(f)
			f.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back %d bytes (want %d), %v", len(got), len(data), err)
			}
			st := cluster.Stats()
			// Every block written through a pipeline of three (client to
			// the first datanode, and on) and read once: each connection
			// ran the handshake, none was refused.
			if st.HandshakesRefused != 0 || st.Handshakes < st.WriteOps+st.ReadOps {
				t.Fatalf("%d handshakes, %d refused, for %d writes and %d reads", st.Handshakes, st.HandshakesRefused, st.WriteOps, st.ReadOps)
			}

			// The same cluster, a client whose hdfs-site.xml does not ask
			// for the handshake: the datanodes refuse it.
			lax := confCopy(t, conf, func(site string) string {
				return strings.Replace(site, "dfs.data.transfer.protection", "dfs.data.transfer.protection.unset", 1)
			})
			plain := NewResolver(Options{HadoopConfDir: lax})
			defer plain.Close()
			pfs, _, err := plain.Resolve(ctx, "hdfs:///")
			if err != nil {
				t.Fatal(err)
			}
			before := cluster.Stats().HandshakesRefused
			if f, err := pfs.Open(ctx, "/blocks.bin"); err == nil {
				_, err = io.ReadAll(f)
				f.Close()
				if err == nil {
					t.Fatal("read without the data-transfer handshake")
				}
			}
			if cluster.Stats().HandshakesRefused == before {
				t.Fatal("no datanode refused the client without the handshake")
			}
		})
	}
}

// TestDataTransferProtectionMismatch: a client whose hdfs-site.xml asks for
// less than the datanodes require is refused on reads and writes with an
// error naming dfs.data.transfer.protection and both levels.
func TestDataTransferProtectionMismatch(t *testing.T) {
	_, conf := startHDFS(t, hdfstest.Config{DataTransferProtection: "privacy"})
	ctx := testCtx(t)
	r := NewResolver(Options{HadoopConfDir: conf})
	defer r.Close()
	fs, _, err := r.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, "/x", "hello")
	lax := confCopy(t, conf, func(site string) string {
		return strings.Replace(site, "<value>privacy</value>", "<value>integrity</value>", 1)
	})
	r2 := NewResolver(Options{HadoopConfDir: lax})
	defer r2.Close()
	fs2, _, err := r2.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	const says = "requires dfs.data.transfer.protection privacy, and this client is configured for integrity"
	f, err := fs2.Open(ctx, "/x")
	if err == nil {
		_, err = io.ReadAll(f)
		f.Close()
	}
	if !errors.Is(err, hadooprpc.ErrProtection) || !strings.Contains(err.Error(), says) {
		t.Fatalf("read: %v", err)
	}
	w, err := fs2.CreateAtomic(ctx, "/y")
	if err == nil {
		if _, err = w.Write([]byte("data")); err == nil {
			err = w.Commit()
		}
	}
	if !errors.Is(err, hadooprpc.ErrProtection) || !strings.Contains(err.Error(), says) {
		t.Fatalf("write: %v", err)
	}
}

// TestTokenProtectionLevels: a process holding only a delegation token
// (an executor) reads and writes an HDFS whose namenode requires
// hadoop.rpc.protection integrity, or privacy, of token connections and
// whose datanodes require the same dfs.data.transfer.protection; with
// less configured it is refused, naming the setting, as a configuration
// error rather than an unreachable namenode.
func TestTokenProtectionLevels(t *testing.T) {
	id := hadooprpc.DelegationTokenIdentifier{Owner: "alice", Renewer: "yarn", IssueDate: time.Now(), MaxDate: time.Now().Add(time.Hour), SequenceNumber: 1, MasterKeyID: 1}.Marshal()
	tok := hadooprpc.Token{Identifier: id, Password: []byte("the-token-password"), Kind: hadooprpc.KindHDFSDelegationToken}
	lookup := func(got []byte) ([]byte, string, error) {
		if !bytes.Equal(got, id) {
			return nil, "", errors.New("unknown token")
		}
		return tok.Password, "alice", nil
	}
	for _, level := range []string{"integrity", "privacy"} {
		t.Run(level, func(t *testing.T) {
			cluster, conf := startHDFS(t, hdfstest.Config{
				SASL:      hadooprpc.TokenServer{Lookup: lookup, Protection: level},
				Superuser: "alice", DataTransferProtection: level,
			})
			tok := tok
			tok.Service = cluster.NameNodeAddrs()[0]
			creds := hadooprpc.NewCredentials()
			creds.Tokens[tok.Service] = tok
			b, err := creds.Marshal(hadooprpc.CredentialsProtobuf)
			if err != nil {
				t.Fatal(err)
			}
			tokFile := filepath.Join(t.TempDir(), "container_tokens")
			if err := os.WriteFile(tokFile, b, 0o600); err != nil {
				t.Fatal(err)
			}
			withProtection := func(rpc string) string {
				return confCopy(t, conf, func(site string) string {
					if !strings.Contains(site, "fs.defaultFS") {
						return site
					}
					return strings.Replace(site, "</configuration>", "<property><name>hadoop.rpc.protection</name><value>"+rpc+"</value></property></configuration>", 1)
				})
			}
			ctx := testCtx(t)
			r := NewResolver(Options{HadoopConfDir: withProtection(level), TokenFile: tokFile})
			defer r.Close()
			fs, _, err := r.Resolve(ctx, "hdfs:///")
			if err != nil {
				t.Fatal(err)
			}
			writeFile(t, fs, "/out.txt", "written with a token at "+level)
			if got := readFile(t, fs, "/out.txt"); got != "written with a token at "+level {
				t.Fatalf("read %q", got)
			}
			st := cluster.Stats()
			if st.NameNodeCallsByAuth["TOKEN "+level] == 0 || st.Handshakes == 0 || st.HandshakesRefused != 0 {
				t.Fatalf("namenode calls %v, datanode handshakes %d (%d refused)", st.NameNodeCallsByAuth, st.Handshakes, st.HandshakesRefused)
			}

			lax := NewResolver(Options{HadoopConfDir: withProtection("authentication"), TokenFile: tokFile})
			defer lax.Close()
			_, _, err = lax.Resolve(ctx, "hdfs:///")
			if !errors.Is(err, hadooprpc.ErrProtection) || !errors.Is(err, ErrHadoopConfig) || errors.Is(err, ErrNamenodeUnreachable) ||
				!strings.Contains(err.Error(), "requires hadoop.rpc.protection "+level+" of token connections, and this client is configured for authentication") {
				t.Fatalf("a client configured for authentication: %v", err)
			}
		})
	}
}

// BenchmarkHDFSReadProtection reads a 16 MiB file in 4 MiB ReadAt calls
// from a test HDFS whose datanodes require dfs.data.transfer.protection
// integrity, or privacy, and, in the same iteration, the same file from
// one that does not: the throughputs of the fastest iterations and their
// ratio, the cost of the HMAC-MD5 (and triple DES, or AES-CTR when both
// ends name it in dfs.encrypt.data.transfer.cipher.suites) on every byte.
func BenchmarkHDFSReadProtection(b *testing.B) {
	const size = 16 << 20
	data := testData(size, 1)
	open := func(b *testing.B, protection string) FS {
		cfg := hdfstest.Config{BlockSize: size, Replication: 1, DataNodes: 1, DataTransferProtection: protection}
		if l, ok := strings.CutSuffix(protection, "+aes"); ok {
			cfg.DataTransferProtection, cfg.DataTransferCipherSuites = l, "AES/CTR/NoPadding"
		}
		c := hdfstest.NewTestCluster(b, cfg)
		conf := b.TempDir()
		if err := c.WriteConfig(conf); err != nil {
			b.Fatal(err)
		}
		res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
		b.Cleanup(func() { res.Close() })
		hfs, _, err := res.Resolve(context.Background(), "hdfs:///")
		if err != nil {
			b.Fatal(err)
		}
		w, err := hfs.CreateAtomic(context.Background(), "/raw")
		if err != nil {
			b.Fatal(err)
		}
		if _, err := w.Write(data); err != nil {
			b.Fatal(err)
		}
		if err := w.Commit(); err != nil {
			b.Fatal(err)
		}
		return hfs
	}
	read := func(b *testing.B, fs FS) time.Duration {
		t0 := time.Now()
		f, err := fs.Open(context.Background(), "/raw")
		if err != nil {
			b.Fatal(err)
		}
		defer f.Close()
		buf := make([]byte, 4<<20)
		for off := int64(0); off < size; off += int64(len(buf)) {
			if _, err := f.ReadAt(buf, off); err != nil && err != io.EOF {
				b.Fatal(err)
			}
		}
		return time.Since(t0)
	}
	plain := open(b, "")
	for _, level := range []string{"authentication", "integrity", "privacy", "privacy+aes"} {
		b.Run(level, func(b *testing.B) {
			protected := open(b, level)
			var plainTime, protTime fastest
			b.SetBytes(size)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				plainTime.add(read(b, plain))
				protTime.add(read(b, protected))
			}
			b.StopTimer()
			mb := float64(size) / 1e6
			b.ReportMetric(mb/plainTime.d.Seconds(), "plain-MB/s")
			b.ReportMetric(mb/protTime.d.Seconds(), "protected-MB/s")
			b.ReportMetric(plainTime.d.Seconds()/protTime.d.Seconds(), "protected/plain")
		})
	}
}

// confCopy copies the site files of the Hadoop configuration conf into a
// new directory, each through edit, and returns the directory.
func confCopy(t *testing.T, conf string, edit func(site string) string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"core-site.xml", "hdfs-site.xml"} {
		b, err := os.ReadFile(filepath.Join(conf, name))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(edit(string(b))), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}
