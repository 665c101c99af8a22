package fsys

import (
	"bytes"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// TestHDFSWriteLosesADataNode kills a datanode of a file's write pipeline
// in the middle of a block, the pipeline's head or its mirror: the write
// goes on on a new pipeline, and the file reads back whole.
func TestHDFSWriteLosesADataNode(t *testing.T) {
	for _, at := range []int{0, 1} {
		t.Run(fmt.Sprintf("pipeline datanode %d", at), func(t *testing.T) {
			c, conf := startHDFS(t, hdfstest.Config{DataNodes: 3, Replication: 2})
			res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
			defer res.Close()
			ctx := testCtx(t)
			fsys, _, err := res.Resolve(ctx, "hdfs:///")
			if err != nil {
				t.Fatal(err)
			}
			if err := fsys.MkdirAll(ctx, "/w"); err != nil {
				t.Fatal(err)
			}
			data := testData(3*testBlock, 9)
			af, err := fsys.CreateAtomic(ctx, "/w/f")
			if err != nil {
				t.Fatal(err)
			}
			half := testBlock + testBlock/2
			if _, err := af.Write(data[:half]); err != nil {
				t.Fatal(err)
			}
			// The block being written is the temporary file's last.
			infos, err := fsys.ReadDir(ctx, "/w")
			if err != nil || len(infos) != 1 {
				t.Fatalf("list /w: %v %v", infos, err)
			}
			blocks, err := c.Blocks("/w/" + infos[0].Name())
			if err != nil || len(blocks) < 2 {
				t.Fatalf("blocks of %s: %v %v", infos[0].Name(), blocks, err)
			}
			victim := blocks[len(blocks)-1].Pipeline[at]
			if err := c.KillDataNode(victim); err != nil {
				t.Fatal(err)
			}
			if _, err := af.Write(data[half:]); err != nil {
				t.Fatalf("write after datanode %d died: %v", victim, err)
			}
			if err := af.Commit(); err != nil {
				t.Fatalf("commit after datanode %d died: %v", victim, err)
			}
			f, err := fsys.Open(ctx, "/w/f")
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			got, err := io.ReadAll(f)
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read back: %d bytes, %v; want the %d written", len(got), err, len(data))
			}
			if left, _ := fsys.ReadDir(ctx, "/w"); len(left) != 1 {
				t.Errorf("/w holds %d files after the commit, want the one (no temporary left)", len(left))
			}
		})
	}
}

// TestHDFSWriteLosesEveryDataNode: with no datanode left the write fails,
// naming the file and saying why (the namenode's words: no datanode
// running).
func TestHDFSWriteLosesEveryDataNode(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{DataNodes: 2, Replication: 1})
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	ctx := testCtx(t)
	fsys, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	data := testData(2*testBlock, 10)
	af, err := fsys.CreateAtomic(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := af.Write(data[:testBlock/2]); err != nil {
		t.Fatal(err)
	}
	for _, d := range c.DataNodes() {
		if err := c.KillDataNode(d.Index); err != nil {
			t.Fatal(err)
		}
	}
	_, err = af.Write(data[testBlock/2:])
	if err == nil {
		err = af.Commit()
	} else {
		af.Abort()
	}
	msg := fmt.Sprint(err)
	if err == nil || !strings.Contains(msg, "/f") || !strings.Contains(msg, "0 datanode(s) running") {
		t.Fatalf("write with every datanode dead: %v, want an error naming the file and saying no datanode runs", err)
	}
}

// TestHDFSReadEveryReplicaGone: a read continues on another replica (as
// TestHDFSFailures shows); with every replica of a block gone it fails,
// naming the block and the datanodes it tried.
func TestHDFSReadEveryReplicaGone(t *testing.T) {
	c, conf := startHDFS(t, hdfstest.Config{DataNodes: 3, Replication: 2})
	res := NewResolver(Options{HadoopConfDir: conf, User: c.Superuser()})
	defer res.Close()
	ctx := testCtx(t)
	fsys, _, err := res.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	data := testData(3*testBlock, 11)
	af, _ := fsys.CreateAtomic(ctx, "/f")
	af.Write(data)
	if err := af.Commit(); err != nil {
		t.Fatal(err)
	}
	f, err := fsys.Open(ctx, "/f")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(make([]byte, 100), 0); err != nil {
		t.Fatal(err)
	}
	blocks, _ := c.Blocks("/f")
	var addrs []string
	for _, dn := range blocks[1].DataNodes {
		addrs = append(addrs, c.DataNodes()[dn].Addr)
		if err := c.KillDataNode(dn); err != nil {
			t.Fatal(err)
		}
	}
	_, err = f.ReadAt(make([]byte, testBlock), testBlock)
	msg := fmt.Sprint(err)
	if err == nil || !strings.Contains(msg, fmt.Sprintf("blk_%d", blocks[1].ID)) || !strings.Contains(msg, "/f") {
		t.Fatalf("read of a block with no replica left: %v, want an error naming the file and block blk_%d", err, blocks[1].ID)
	}
	for _, a := range addrs {
		if !strings.Contains(msg, a) {
			t.Errorf("the error does not name datanode %s it tried: %v", a, err)
		}
	}
}
