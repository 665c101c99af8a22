package fsys

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hdfstest"
)

// TestDataTransferProtection: on an HDFS whose datanodes require the SASL
// handshake of dfs.data.transfer.protection, at each level, Spindle reads
// and writes files of several blocks through replication pipelines, its
// datanode connections authenticated with the block tokens the namenode
// hands out, and protected at the level the site files name; a client
// whose site files lack the setting is turned away.
func TestDataTransferProtection(t *testing.T) {
	data := bytes.Repeat([]byte("0123456789abcdefghijklmnopqrstuv"), 3*testBlock/32+100)
	for _, level := range []string{"authentication", "integrity", "privacy"} {
		t.Run(level, func(t *testing.T) {
			cluster, conf := startHDFS(t, hdfstest.Config{DataTransferProtection: level})
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
			lax := t.TempDir()
			for _, name := range []string{"core-site.xml", "hdfs-site.xml"} {
				b, err := os.ReadFile(filepath.Join(conf, name))
				if err != nil {
					t.Fatal(err)
				}
				b = []byte(strings.Replace(string(b), "dfs.data.transfer.protection", "dfs.data.transfer.protection.unset", 1))
				if err := os.WriteFile(filepath.Join(lax, name), b, 0o644); err != nil {
					t.Fatal(err)
				}
			}
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
	lax := t.TempDir()
	for _, name := range []string{"core-site.xml", "hdfs-site.xml"} {
		b, err := os.ReadFile(filepath.Join(conf, name))
		if err != nil {
			t.Fatal(err)
		}
		b = []byte(strings.Replace(string(b), "<value>privacy</value>", "<value>integrity</value>", 1))
		if err := os.WriteFile(filepath.Join(lax, name), b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
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
