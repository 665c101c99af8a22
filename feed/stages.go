package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/compute"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// Random streams drawn for an epoch, kept apart so that changing one use
// does not change the other.
const (
	streamSplits = 1
	streamRows   = 2
)

// splitmix is SplitMix64's finaliser: a bijective 64-bit mix.
func splitmix(x uint64) uint64 {
	x += 0x9e3779b97f4a7c15
	x = (x ^ x>>30) * 0xbf58476d1ce4e5b9
	x = (x ^ x>>27) * 0x94d049bb133111eb
	return x ^ x>>31
}

// rebatcher cuts its input into batches of exactly size rows (the last
// may be short): a zero-copy slice when one input batch holds them, a
// concatenation when a batch straddles inputs.
type rebatcher struct {
	in     stage
	schema *arrow.Schema
	size   int64
	alloc  memory.Allocator

	pending []arrow.RecordBatch
	rows    int64
	eof     bool
}

func newRebatcher(in stage, schema *arrow.Schema, size int64, alloc memory.Allocator) *rebatcher {
	return &rebatcher{in: in, schema: schema, size: size, alloc: alloc}
}

func (b *rebatcher) next(ctx context.Context) (arrow.RecordBatch, error) {
	for b.rows < b.size && !b.eof {
		rec, err := b.in.next(ctx)
		if errors.Is(err, io.EOF) {
			b.eof = true
			break
		}
		if err != nil {
			return nil, err
		}
		if rec.NumRows() == 0 {
			rec.Release()
			continue
		}
		b.pending = append(b.pending, rec)
		b.rows += rec.NumRows()
	}
	if b.rows == 0 {
		return nil, io.EOF
	}
	n := min(b.size, b.rows)
	first := b.pending[0]
	if first.NumRows() >= n {
		b.rows -= n
		if first.NumRows() == n {
			b.pending = b.pending[1:]
			return first, nil
		}
		out := first.NewSlice(0, n)
		b.pending[0] = first.NewSlice(n, first.NumRows())
		first.Release()
		return out, nil
	}
	// Gather n rows from the front of several pending batches.
	var parts []arrow.RecordBatch
	left := n
	for left > 0 {
		p := b.pending[0]
		if p.NumRows() <= left {
			parts = append(parts, p)
			b.pending = b.pending[1:]
			left -= p.NumRows()
			continue
		}
		parts = append(parts, p.NewSlice(0, left))
		b.pending[0] = p.NewSlice(left, p.NumRows())
		p.Release()
		left = 0
	}
	b.rows -= n
	out, err := concatBatches(b.schema, parts, b.alloc)
	for _, p := range parts {
		p.Release()
	}
	return out, err
}

func (b *rebatcher) close() error {
	for _, p := range b.pending {
		p.Release()
	}
	b.pending, b.rows = nil, 0
	return b.in.close()
}

// concatBatches joins batches of one schema into one batch.
func concatBatches(schema *arrow.Schema, parts []arrow.RecordBatch, alloc memory.Allocator) (arrow.RecordBatch, error) {
	var rows int64
	for _, p := range parts {
		rows += p.NumRows()
	}
	cols := make([]arrow.Array, schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	pieces := make([]arrow.Array, len(parts))
	for i := range cols {
		for j, p := range parts {
			pieces[j] = p.Column(i)
		}
		c, err := array.Concatenate(pieces, alloc)
		if err != nil {
			return nil, fmt.Errorf("feed pipeline: join batches of column %q: %w", schema.Field(i).Name, err)
		}
		cols[i] = c
	}
	return array.NewRecordBatch(schema, cols, rows), nil
}

// rowShuffler cuts its input into windows of exactly window rows (the
// last may be shorter), whatever the sizes of the batches it reads, and
// returns each window's rows in the order of the window's permutation
// (the epoch rules in epoch.go).
type rowShuffler struct {
	in     stage
	schema *arrow.Schema
	window int64
	key    uint64 // the epoch's rows key
	alloc  memory.Allocator

	w     int64             // windows returned so far
	carry arrow.RecordBatch // rows read past the last window's end
	// Scratch reused from window to window.
	idx   []int64
	keys  []uint64
	which []uint32
	at    []partRow
}

func newRowShuffler(in stage, schema *arrow.Schema, window int, key uint64, alloc memory.Allocator) *rowShuffler {
	return &rowShuffler{in: in, schema: schema, window: int64(window), key: key, alloc: alloc}
}

func (s *rowShuffler) next(ctx context.Context) (arrow.RecordBatch, error) {
	var parts []arrow.RecordBatch
	defer func() {
		for _, p := range parts {
			p.Release()
		}
	}()
	var rows int64
	if s.carry != nil {
		parts, rows, s.carry = append(parts, s.carry), s.carry.NumRows(), nil
	}
	for rows < s.window {
		rec, err := s.in.next(ctx)
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		parts = append(parts, rec)
		rows += rec.NumRows()
	}
	if rows == 0 {
		return nil, io.EOF
	}
	if rows > s.window {
		// The window ends inside the last batch: keep its tail for the next.
		last := parts[len(parts)-1]
		keep := last.NumRows() - (rows - s.window)
		s.carry = last.NewSlice(keep, last.NumRows())
		parts[len(parts)-1] = last.NewSlice(0, keep)
		last.Release()
		rows = s.window
	}
	if cap(s.idx) < int(rows) {
		s.idx = make([]int64, rows)
	}
	idx := s.idx[:rows]
	s.keys = permutation(idx, windowKey(s.key, s.w), s.keys)
	s.w++

	cols := make([]arrow.Array, s.schema.NumFields())
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	// Fixed-width columns are gathered straight from the window's
	// batches; joining them first would copy every value once more.
	var at []partRow
	if len(parts) > 1 {
		at = s.locate(parts, idx)
	}
	for i := range cols {
		if len(parts) == 1 {
			cols[i] = gatherFixed(parts[0].Column(i), idx, s.alloc)
		} else {
			cols[i] = gatherFixedParts(parts, i, at, s.alloc)
		}
		if cols[i] != nil {
			continue
		}
		c, err := s.take(ctx, parts, i, idx)
		if err != nil {
			return nil, err
		}
		cols[i] = c
	}
	return array.NewRecordBatch(s.schema, cols, rows), nil
}

// take gathers column i of the window with arrow's take kernel.
func (s *rowShuffler) take(ctx context.Context, parts []arrow.RecordBatch, i int, idx []int64) (arrow.Array, error) {
	col := parts[0].Column(i)
	if len(parts) > 1 {
		pieces := make([]arrow.Array, len(parts))
		for j, p := range parts {
			pieces[j] = p.Column(i)
		}
		joined, err := array.Concatenate(pieces, s.alloc)
		if err != nil {
			return nil, fmt.Errorf("feed pipeline: join batches of column %q: %w", s.schema.Field(i).Name, err)
		}
		defer joined.Release()
		col = joined
	}
	idxBuf := memory.NewBufferBytes(arrow.Int64Traits.CastToBytes(idx))
	indices := array.NewInt64Data(array.NewData(arrow.PrimitiveTypes.Int64, len(idx), []*memory.Buffer{nil, idxBuf}, nil, 0, 0))
	defer indices.Release()
	c, err := compute.TakeArray(compute.WithAllocator(ctx, s.alloc), col, indices)
	if err != nil {
		return nil, fmt.Errorf("feed pipeline: shuffle column %q: %w", s.schema.Field(i).Name, err)
	}
	return c, nil
}

// partRow locates a row of a window: row row of batch number part.
type partRow struct{ part, row uint32 }

// locate turns window row numbers into batch and row.
func (s *rowShuffler) locate(parts []arrow.RecordBatch, idx []int64) []partRow {
	starts := make([]int64, len(parts)+1)
	for j, p := range parts {
		starts[j+1] = starts[j] + p.NumRows()
	}
	// which[r] is the part holding window row r.
	if cap(s.which) < len(idx) {
		s.which = make([]uint32, len(idx))
	}
	which := s.which[:len(idx)]
	for j := range parts {
		for r := starts[j]; r < starts[j+1]; r++ {
			which[r] = uint32(j)
		}
	}
	if cap(s.at) < len(idx) {
		s.at = make([]partRow, len(idx))
	}
	at := s.at[:len(idx)]
	for k, r := range idx {
		j := which[r]
		at[k] = partRow{part: j, row: uint32(r - starts[j])}
	}
	return at
}

func (s *rowShuffler) close() error {
	if s.carry != nil {
		s.carry.Release()
		s.carry = nil
	}
	return s.in.close()
}

// gatherFixed returns a's values at idx for arrays of fixed-width numbers
// and times without nulls, the columns training data is mostly made of,
// in a plain loop; nil means use the general take kernel.
func gatherFixed(a arrow.Array, idx []int64, alloc memory.Allocator) arrow.Array {
	width := fixedWidth(a.DataType())
	if width == 0 || a.NullN() > 0 {
		return nil
	}
	src := fixedValues(a, width)
	buf := memory.NewResizableBuffer(alloc)
	buf.Resize(len(idx) * width)
	dst := buf.Bytes()
	switch width {
	case 1:
		for i, j := range idx {
			dst[i] = src[j]
		}
	case 2:
		gatherWords(asWords[uint16](dst), asWords[uint16](src), idx)
	case 4:
		gatherWords(asWords[uint32](dst), asWords[uint32](src), idx)
	case 8:
		gatherWords(asWords[uint64](dst), asWords[uint64](src), idx)
	}
	out := array.NewData(a.DataType(), len(idx), []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	defer out.Release()
	return array.MakeFromData(out)
}

// fixedWidth returns the byte width of the fixed-width numbers and times
// gatherFixed handles, or 0.
func fixedWidth(dt arrow.DataType) int {
	switch dt.ID() {
	case arrow.INT8, arrow.UINT8, arrow.INT16, arrow.UINT16, arrow.INT32, arrow.UINT32, arrow.INT64, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.DATE32, arrow.DATE64, arrow.TIMESTAMP,
		arrow.TIME32, arrow.TIME64, arrow.DURATION:
	default:
		return 0
	}
	switch w := dt.(arrow.FixedWidthDataType).BitWidth() / 8; w {
	case 1, 2, 4, 8:
		return w
	}
	return 0
}

// fixedValues returns the bytes of a's values, a fixed-width array.
func fixedValues(a arrow.Array, width int) []byte {
	d := a.Data()
	if d.Len() == 0 {
		return nil
	}
	return d.Buffers()[1].Bytes()[d.Offset()*width : (d.Offset()+d.Len())*width]
}

// gatherFixedParts is gatherFixed over a window held in several batches:
// at names each output row by batch and row.
func gatherFixedParts(parts []arrow.RecordBatch, col int, at []partRow, alloc memory.Allocator) arrow.Array {
	dt := parts[0].Column(col).DataType()
	width := fixedWidth(dt)
	if width == 0 {
		return nil
	}
	srcs := make([][]byte, len(parts))
	for j, p := range parts {
		a := p.Column(col)
		if a.NullN() > 0 {
			return nil
		}
		srcs[j] = fixedValues(a, width)
	}
	buf := memory.NewResizableBuffer(alloc)
	buf.Resize(len(at) * width)
	dst := buf.Bytes()
	switch width {
	case 1:
		for i, l := range at {
			dst[i] = srcs[l.part][l.row]
		}
	case 2:
		gatherWordsParts(asWords[uint16](dst), wordSlices[uint16](srcs), at)
	case 4:
		gatherWordsParts(asWords[uint32](dst), wordSlices[uint32](srcs), at)
	case 8:
		gatherWordsParts(asWords[uint64](dst), wordSlices[uint64](srcs), at)
	}
	out := array.NewData(dt, len(at), []*memory.Buffer{nil, buf}, nil, 0, 0)
	buf.Release()
	defer out.Release()
	return array.MakeFromData(out)
}

func gatherWordsParts[T uint16 | uint32 | uint64](dst []T, srcs [][]T, at []partRow) {
	dst = dst[:len(at)]
	for i, l := range at {
		dst[i] = srcs[l.part][l.row]
	}
}

func wordSlices[T uint16 | uint32 | uint64](b [][]byte) [][]T {
	out := make([][]T, len(b))
	for i := range b {
		out[i] = asWords[T](b[i])
	}
	return out
}

func gatherWords[T uint16 | uint32 | uint64](dst, src []T, idx []int64) {
	dst = dst[:len(idx)]
	for i, j := range idx {
		dst[i] = src[j]
	}
}

// asWords views b as a slice of T.
func asWords[T uint16 | uint32 | uint64](b []byte) []T {
	var zero T
	n := len(b) / int(unsafe.Sizeof(zero))
	if n == 0 {
		return nil
	}
	return unsafe.Slice((*T)(unsafe.Pointer(unsafe.SliceData(b))), n)
}
