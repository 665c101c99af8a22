package wire

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"runtime"
	"sync"
	"unsafe"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
)

// Tensor stream constants (docs/feed-protocol.md).
const (
	tensorMagic   = "SPTF"
	tensorVersion = 1
	// flagLabel says a label vector follows each feature matrix.
	flagLabel = 1 << 0
	// tensorHeaderFixed is the size of the header before the names.
	tensorHeaderFixed = 4 + 2 + 2 + 4 + 4 + 4
	// maxNamesBytes bounds the names a client accepts in a header.
	maxNamesBytes = 64 << 20
)

// littleEndian is true on hosts whose float32 memory layout is already the
// wire layout, which lets conversion write straight into the send buffer.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// CheckTensorSchema reports whether tensor mode can feed schema: every
// column, including the label column when label is not empty, must hold
// integers, floats or booleans, and at least one feature column must
// remain. The error names the offending column. The driver calls it when
// it plans a job so that a bad column fails the submission, not a rank.
func CheckTensorSchema(schema *arrow.Schema, label string) error {
	_, _, err := tensorColumns(schema, label)
	return err
}

// tensorColumns returns the indices of the feature columns and of the
// label column (-1 when there is none) of schema.
func tensorColumns(schema *arrow.Schema, label string) (features []int, labelIdx int, err error) {
	if schema == nil {
		return nil, -1, fmt.Errorf("tensor feed: no schema")
	}
	labelIdx = -1
	for i, f := range schema.Fields() {
		if !numeric(f.Type) {
			what := "column"
			if f.Name == label {
				what = "label column"
			}
			return nil, -1, fmt.Errorf("%w: %s %q has type %s; the tensor feed takes integer, float and boolean columns "+
				"(leave it out with --columns, cast it when writing the data, or use --feed arrow)",
				ErrNotNumeric, what, f.Name, f.Type)
		}
		if label != "" && f.Name == label && labelIdx < 0 {
			labelIdx = i
			continue
		}
		features = append(features, i)
	}
	if label != "" && labelIdx < 0 {
		return nil, -1, fmt.Errorf("tensor feed: label column %q is not among the columns %v", label, fieldNames(schema))
	}
	if len(features) == 0 {
		return nil, -1, fmt.Errorf("tensor feed: no feature columns besides the label %q", label)
	}
	return features, labelIdx, nil
}

func fieldNames(schema *arrow.Schema) []string {
	names := make([]string, schema.NumFields())
	for i, f := range schema.Fields() {
		names[i] = f.Name
	}
	return names
}

// numeric reports whether tensor mode converts values of type t.
func numeric(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64,
		arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64,
		arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL:
		return true
	}
	return false
}

// tensorEncoder turns record batches into tensor-mode batch frames.
type tensorEncoder struct {
	schema   *arrow.Schema
	features []int
	label    int
	cols     []featureColumn // the batch being encoded
	workers  []rowWorker     // for encode's goroutines
}

// featureColumn is a feature of a batch: its values, when they are
// float32 without nulls, or else the column to convert.
type featureColumn struct {
	values []float32
	col    arrow.Array
}

// rowWorker is one goroutine's room to turn a block of rows of the
// feature columns into rows: a view of each column's block, and the
// block of each column it converts (a few KiB, kept in the first-level
// cache from conversion to interleave).
type rowWorker struct {
	views   [][]float32
	scratch []float32
}

func newTensorEncoder(schema *arrow.Schema, label string) (*tensorEncoder, error) {
	features, labelIdx, err := tensorColumns(schema, label)
	if err != nil {
		return nil, err
	}
	return &tensorEncoder{schema: schema, features: features, label: labelIdx}, nil
}

// header returns the stream header for epoch.
func (e *tensorEncoder) header(epoch int) []byte {
	names := make([]string, 0, len(e.features)+1)
	for _, i := range e.features {
		names = append(names, e.schema.Field(i).Name)
	}
	var flags uint16
	if e.label >= 0 {
		flags |= flagLabel
		names = append(names, e.schema.Field(e.label).Name)
	}
	js, err := json.Marshal(names)
	if err != nil {
		panic(fmt.Sprintf("wire: marshal column names: %v", err)) // strings always marshal
	}
	h := make([]byte, tensorHeaderFixed, tensorHeaderFixed+len(js))
	copy(h, tensorMagic)
	binary.LittleEndian.PutUint16(h[4:], tensorVersion)
	binary.LittleEndian.PutUint16(h[6:], flags)
	binary.LittleEndian.PutUint32(h[8:], uint32(int32(epoch)))
	binary.LittleEndian.PutUint32(h[12:], uint32(len(e.features)))
	binary.LittleEndian.PutUint32(h[16:], uint32(len(js)))
	return append(h, js...)
}

// frameWords is the 4-byte words of the frame of a batch of rows rows.
func (e *tensorEncoder) frameWords(rows int) int {
	n := 1 + rows*len(e.features)
	if e.label >= 0 {
		n += rows
	}
	return n
}

// encode converts rec into one batch frame: the row count followed by the
// row-major features and the labels, ready for a single Write. The frame
// lives in buf, grown as needed and returned for reuse.
func (e *tensorEncoder) encode(rec arrow.RecordBatch, buf []float32) ([]float32, []byte, error) {
	if int(rec.NumCols()) != e.schema.NumFields() {
		return buf, nil, fmt.Errorf("tensor feed: batch has %d columns, schema has %d", rec.NumCols(), e.schema.NumFields())
	}
	rows := int(rec.NumRows())
	if rows > math.MaxUint32 {
		return buf, nil, fmt.Errorf("tensor feed: batch of %d rows is too large", rows)
	}
	nf := len(e.features)
	n := e.frameWords(rows)
	if cap(buf) < n {
		buf = make([]float32, n)
	}
	buf = buf[:n]
	// The first word carries the row count as a uint32, not a float.
	binary.LittleEndian.PutUint32(f32bytes(buf[:1]), uint32(rows))

	// float32 columns without nulls are read as they are; the others are
	// converted a block of rows at a time, with contiguous,
	// type-specialised loops, just before the block is interleaved.
	if len(e.cols) != nf {
		e.cols = make([]featureColumn, nf)
	}
	defer clear(e.cols) // hold no reference to rec past this call
	for j, ci := range e.features {
		col := rec.Column(ci)
		if err := checkColumn(col, e.schema.Field(ci), rows); err != nil {
			return buf, nil, err
		}
		if f, ok := col.(*array.Float32); ok && f.NullN() == 0 {
			e.cols[j] = featureColumn{values: f.Float32Values()}
		} else {
			e.cols[j] = featureColumn{col: col}
		}
	}
	e.workers = toRowsParallel(buf[1:1+rows*nf], e.cols, rows, e.workers)
	if e.label >= 0 {
		col := rec.Column(e.label)
		if err := checkColumn(col, e.schema.Field(e.label), rows); err != nil {
			return buf, nil, err
		}
		putColumn(buf[1+rows*nf:1+rows*nf+rows], col, 0, rows)
	}
	out := f32bytes(buf)
	if !littleEndian {
		// Values were written in host order; the wire wants little-endian.
		for i := 4; i < len(out); i += 4 {
			v := binary.NativeEndian.Uint32(out[i:])
			binary.LittleEndian.PutUint32(out[i:], v)
		}
	}
	return buf, out, nil
}

func checkColumn(col arrow.Array, f arrow.Field, rows int) error {
	if col.Len() != rows {
		return fmt.Errorf("tensor feed: column %q has %d values in a batch of %d rows", f.Name, col.Len(), rows)
	}
	if !arrow.TypeEqual(col.DataType(), f.Type) {
		return fmt.Errorf("tensor feed: column %q has type %s in a batch, %s in the schema", f.Name, col.DataType(), f.Type)
	}
	return nil
}

// f32bytes views a float32 slice as its bytes.
func f32bytes(v []float32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

// bytesF32 views bytes (4-byte aligned, length a multiple of 4) as float32s.
func bytesF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

type number interface {
	~int8 | ~int16 | ~int32 | ~int64 | ~uint8 | ~uint16 | ~uint32 | ~uint64 | ~float32 | ~float64
}

// parallelValues is the batch size, in values, from which the conversion
// to rows is shared among goroutines: it reads every column from memory
// and is the tensor feed's largest cost, while the socket writer and the
// consumer leave CPU time over.
const parallelValues = 1 << 17

// toRowsParallel is toRows over all rows, on up to GOMAXPROCS goroutines
// (at most four) for large batches, each a range of whole rows, with the
// workers given (more are made as needed and returned). The result is
// the same.
func toRowsParallel(dst []float32, cols []featureColumn, rows int, workers []rowWorker) []rowWorker {
	n := min(runtime.GOMAXPROCS(0), 4)
	if rows*len(cols) < parallelValues {
		n = 1
	}
	for len(workers) < n {
		workers = append(workers, rowWorker{})
	}
	if n == 1 {
		workers[0].toRows(dst, cols, 0, rows)
		return workers
	}
	per := (rows + n - 1) / n
	per = (per + interleaveBlock - 1) / interleaveBlock * interleaveBlock
	var wg sync.WaitGroup
	for w, r0 := 0, 0; r0 < rows; w, r0 = w+1, r0+per {
		wg.Go(func() { workers[w].toRows(dst, cols, r0, min(rows, r0+per)) })
	}
	wg.Wait()
	return workers
}

// toRows writes rows [from, to) of the feature columns row-major into
// dst, as interleave does, a block of interleaveBlock rows at a time:
// the block of each column to convert is converted into w's scratch,
// then the block's rows are interleaved.
func (w *rowWorker) toRows(dst []float32, cols []featureColumn, from, to int) {
	nf := len(cols)
	if len(w.views) != nf {
		w.views = make([][]float32, nf)
		w.scratch = make([]float32, nf*interleaveBlock)
	}
	defer clear(w.views)
	for r0 := from; r0 < to; r0 += interleaveBlock {
		r1 := min(to, r0+interleaveBlock)
		n := r1 - r0
		for j, c := range cols {
			if c.col == nil {
				w.views[j] = c.values[r0:r1]
				continue
			}
			v := w.scratch[j*interleaveBlock : j*interleaveBlock+n]
			putColumn(v, c.col, r0, r1)
			w.views[j] = v
		}
		interleave(dst[r0*nf:r1*nf], w.views, 0, n)
	}
}

// putColumn writes rows [r0, r1) of col as float32 into dst[0 : r1-r0].
// Nulls become NaN.
func putColumn(dst []float32, col arrow.Array, r0, r1 int) {
	dst = dst[:r1-r0]
	switch a := col.(type) {
	case *array.Float32:
		copy(dst, a.Float32Values()[r0:r1])
	case *array.Float64:
		convert(dst, a.Float64Values()[r0:r1])
	case *array.Int8:
		convert(dst, a.Int8Values()[r0:r1])
	case *array.Int16:
		convert(dst, a.Int16Values()[r0:r1])
	case *array.Int32:
		convert(dst, a.Int32Values()[r0:r1])
	case *array.Int64:
		convert(dst, a.Int64Values()[r0:r1])
	case *array.Uint8:
		convert(dst, a.Uint8Values()[r0:r1])
	case *array.Uint16:
		convert(dst, a.Uint16Values()[r0:r1])
	case *array.Uint32:
		convert(dst, a.Uint32Values()[r0:r1])
	case *array.Uint64:
		convert(dst, a.Uint64Values()[r0:r1])
	case *array.Float16:
		for i, v := range a.Values()[r0:r1] {
			dst[i] = v.Float32()
		}
	case *array.Boolean:
		bits := a.Data().Buffers()[1].Bytes()
		off := a.Data().Offset() + r0
		for i := range dst {
			dst[i] = 0
			if bitutil.BitIsSet(bits, off+i) {
				dst[i] = 1
			}
		}
	default:
		// tensorColumns and checkColumn admit only the types above.
		panic(fmt.Sprintf("wire: tensor conversion of %s", col.DataType()))
	}
	if col.NullN() > 0 {
		markNulls(dst, col.NullBitmapBytes(), col.Data().Offset()+r0)
	}
}

// markNulls sets dst[i] to NaN where bit off+i of the validity bitmap
// valid is clear, skipping the bytes of eight valid values whole.
func markNulls(dst []float32, valid []byte, off int) {
	for i := 0; i < len(dst); {
		if at := off + i; at%8 == 0 && i+8 <= len(dst) && valid[at/8] == 0xff {
			i += 8
			continue
		}
		if bitutil.BitIsNotSet(valid, off+i) {
			dst[i] = nan32
		}
		i++
	}
}

func convert[T number](dst []float32, vals []T) {
	dst = dst[:len(vals)]
	for i, v := range vals {
		dst[i] = float32(v)
	}
}

// nan32 is what a null becomes: the canonical quiet NaN, 0x7fc00000.
var nan32 = math.Float32frombits(0x7fc00000)
