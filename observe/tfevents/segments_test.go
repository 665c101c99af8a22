package tfevents

import (
	"context"
	"encoding/binary"
	"io"
	"math"
	"path"
	"sort"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protowire"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// readEvents parses one event file: every record's CRCs are checked, and
// each event is returned as its fields.
func readEvents(t *testing.T, b []byte) []map[protowire.Number][]byte {
	t.Helper()
	var out []map[protowire.Number][]byte
	for len(b) > 0 {
		n := binary.LittleEndian.Uint64(b[:8])
		if maskedCRC(b[:8]) != binary.LittleEndian.Uint32(b[8:12]) {
			t.Fatal("length CRC does not match")
		}
		data := b[12 : 12+n]
		if maskedCRC(data) != binary.LittleEndian.Uint32(b[12+n:16+n]) {
			t.Fatal("data CRC does not match")
		}
		out = append(out, fields(data))
		b = b[16+n:]
	}
	return out
}

func fields(m []byte) map[protowire.Number][]byte {
	out := map[protowire.Number][]byte{}
	for len(m) > 0 {
		num, typ, n := protowire.ConsumeTag(m)
		m = m[n:]
		n = protowire.ConsumeFieldValue(num, typ, m)
		out[num] = m[:n]
		m = m[n:]
	}
	return out
}

// scalarOf is an event's step and its one value.
func scalarOf(ev map[protowire.Number][]byte) (int64, string, float32) {
	step, _ := protowire.ConsumeVarint(ev[2])
	summary, _ := protowire.ConsumeBytes(ev[5])
	value, _ := protowire.ConsumeBytes(fields(summary)[1])
	vf := fields(value)
	tag, _ := protowire.ConsumeString(vf[1])
	bits, _ := protowire.ConsumeFixed32(vf[2])
	return int64(step), tag, math.Float32frombits(bits)
}

// TestSegmentsOnHDFS writes a run to the test HDFS in three publishes (two
// while running, one at Close): each is a complete event file starting
// with the version event, TensorBoard's name order is the write order, and
// together they hold every scalar once.
func TestSegmentsOnHDFS(t *testing.T) {
	c := hdfstest.NewTestCluster(t, hdfstest.Config{BlockSize: 64 << 10})
	conf := t.TempDir()
	if err := c.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	t.Setenv("HADOOP_CONF_DIR", conf)
	t.Setenv("HADOOP_USER_NAME", c.Superuser())
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	defer res.Close()
	fs, dir, err := res.Resolve(ctx, "hdfs:///user/"+c.Superuser()+"/tb")
	if err != nil {
		t.Fatal(err)
	}
	run := path.Join(dir, "job-1")
	// An hour-long interval: only the explicit publishes below write.
	w, err := CreateSegments(ctx, fs, run, "host", time.Unix(100, 0), time.Hour, nil)
	if err != nil {
		t.Fatal(err)
	}
	step := int64(0)
	write := func(n int) {
		for range n {
			if err := w.Scalars(time.Unix(101, 0), step, map[string]float64{"loss/rank 0": float64(step) / 4}); err != nil {
				t.Fatal(err)
			}
			step++
		}
	}
	write(3)
	if err := w.publish(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.publish(ctx); err != nil { // nothing new: no segment
		t.Fatal(err)
	}
	write(2)
	if err := w.publish(ctx); err != nil {
		t.Fatal(err)
	}
	write(1)
	if err := w.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if err := w.Scalars(time.Unix(102, 0), 99, map[string]float64{"late": 1}); err == nil {
		t.Error("Scalars after Close succeeded")
	}
	infos, err := fs.ReadDir(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, fi := range infos {
		names = append(names, fi.Name())
	}
	sort.Strings(names)
	want := []string{"events.out.tfevents.100.host.000001", "events.out.tfevents.100.host.000002", "events.out.tfevents.100.host.000003"}
	if strings.Join(names, " ") != strings.Join(want, " ") {
		t.Fatalf("run holds %q, want %q", names, want)
	}
	var got []int64
	for i, n := range names {
		f, err := fs.Open(ctx, path.Join(run, n))
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		events := readEvents(t, b)
		if v, _ := protowire.ConsumeString(events[0][3]); v != "brain.Event:2" {
			t.Fatalf("segment %s starts with %q, not the version event", n, v)
		}
		if wantN := []int{3, 2, 1}[i]; len(events)-1 != wantN {
			t.Errorf("segment %s holds %d scalars, want %d", n, len(events)-1, wantN)
		}
		for _, ev := range events[1:] {
			s, tag, v := scalarOf(ev)
			if tag != "loss/rank 0" || v != float32(s)/4 {
				t.Errorf("segment %s: step %d %q = %v", n, s, tag, v)
			}
			got = append(got, s)
		}
	}
	for i, s := range got {
		if int64(i) != s {
			t.Fatalf("steps in name order %v, want 0..5 once each", got)
		}
	}
	if len(got) != 6 {
		t.Fatalf("steps %v, want 6", got)
	}
}
