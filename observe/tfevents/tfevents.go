// Package tfevents writes TensorBoard event files: the TFRecord framing
// (length, masked CRC-32C of the length, data, masked CRC-32C of the
// data) around tensorflow.Event protocol messages holding scalar
// summaries, so that `tensorboard --logdir` shows what a job's ranks
// reported with spindle.report().
//
// Only the few protobuf fields scalars need are encoded, by hand with
// protowire: Event{wall_time=1, step=2, file_version=3, summary=5},
// Summary{value=1}, Summary.Value{tag=1, simple_value=2}.
package tfevents

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"math"
	"os"
	"path/filepath"
	"sort"
	"sync"
	"time"

	"google.golang.org/protobuf/encoding/protowire"
)

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// maskedCRC is TFRecord's masked CRC-32C of b.
func maskedCRC(b []byte) uint32 {
	c := crc32.Checksum(b, castagnoli)
	return (c>>15 | c<<17) + 0xa282ead8
}

// Writer appends events to one event file. It is safe for concurrent use.
type Writer struct {
	mu   sync.Mutex
	f    *os.File
	w    *bufio.Writer
	path string
}

// Create makes dir (a run's directory) and a new event file in it, named
// as TensorBoard looks for them, and writes the file-version event.
func Create(dir, host string, now time.Time) (*Writer, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("tensorboard: create %s: %w", dir, err)
	}
	path := filepath.Join(dir, fmt.Sprintf("events.out.tfevents.%d.%s", now.Unix(), host))
	f, err := os.OpenFile(path, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("tensorboard: %w", err)
	}
	w := &Writer{f: f, w: bufio.NewWriter(f), path: path}
	if err := w.record(versionEvent(now)); err != nil {
		f.Close()
		return nil, err
	}
	return w, nil
}

// versionEvent is the event every event file starts with.
func versionEvent(now time.Time) []byte {
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(seconds(now)))
	ev = protowire.AppendTag(ev, 3, protowire.BytesType)
	return protowire.AppendString(ev, "brain.Event:2")
}

// Path is the event file's path.
func (w *Writer) Path() string { return w.path }

// Scalars writes one event holding values (tag -> value) at step, tags in
// sorted order, and flushes it to the file.
func (w *Writer) Scalars(now time.Time, step int64, values map[string]float64) error {
	return w.record(scalarsEvent(now, step, values))
}

// scalarsEvent is one event holding values (tag -> value) at step, tags
// in sorted order.
func scalarsEvent(now time.Time, step int64, values map[string]float64) []byte {
	tags := make([]string, 0, len(values))
	for t := range values {
		tags = append(tags, t)
	}
	sort.Strings(tags)
	var summary []byte
	for _, t := range tags {
		var v []byte
		v = protowire.AppendTag(v, 1, protowire.BytesType)
		v = protowire.AppendString(v, t)
		v = protowire.AppendTag(v, 2, protowire.Fixed32Type)
		v = protowire.AppendFixed32(v, math.Float32bits(float32(values[t])))
		summary = protowire.AppendTag(summary, 1, protowire.BytesType)
		summary = protowire.AppendBytes(summary, v)
	}
	var ev []byte
	ev = protowire.AppendTag(ev, 1, protowire.Fixed64Type)
	ev = protowire.AppendFixed64(ev, math.Float64bits(seconds(now)))
	ev = protowire.AppendTag(ev, 2, protowire.VarintType)
	ev = protowire.AppendVarint(ev, uint64(step))
	ev = protowire.AppendTag(ev, 5, protowire.BytesType)
	return protowire.AppendBytes(ev, summary)
}

// appendRecord appends data framed as one TFRecord to b.
func appendRecord(b, data []byte) []byte {
	var head [12]byte
	binary.LittleEndian.PutUint64(head[:8], uint64(len(data)))
	binary.LittleEndian.PutUint32(head[8:], maskedCRC(head[:8]))
	b = append(b, head[:]...)
	b = append(b, data...)
	return binary.LittleEndian.AppendUint32(b, maskedCRC(data))
}

// record frames data as one TFRecord and flushes it.
func (w *Writer) record(data []byte) error {
	framed := appendRecord(nil, data)
	w.mu.Lock()
	defer w.mu.Unlock()
	w.w.Write(framed)
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("tensorboard: write %s: %w", w.path, err)
	}
	return nil
}

// Close flushes and closes the file.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if err := w.w.Flush(); err != nil {
		w.f.Close()
		return fmt.Errorf("tensorboard: write %s: %w", w.path, err)
	}
	return w.f.Close()
}

func seconds(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }
