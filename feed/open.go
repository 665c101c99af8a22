package feed

import (
	"context"
	"errors"
	"fmt"
	"io"
	iofs "io/fs"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/memory"

	feedpq "github.com/spindle-ml/spindle/feed/parquet"
	"github.com/spindle-ml/spindle/fsys"
)

// rawSource yields a split's batches as the format reader produces them.
type rawSource interface {
	// next returns the next batch, which the caller owns, or io.EOF.
	next(ctx context.Context) (arrow.RecordBatch, error)
	close() error
}

// opened is a format reader ready to read a split.
type opened struct {
	src    rawSource
	schema *arrow.Schema // the output schema
	// proj maps output column i to column proj[i] of the raw batches; nil
	// means the raw batches already have the output columns.
	proj []int
}

// OpenSplit opens one split for reading: only its row groups, record
// batches or lines, only the selected columns (label last), starting
// RowOffset rows in and ending after Rows rows. Batches hold at most
// opts.BatchRows rows. Errors name the file; reading fewer rows than the
// split promises is an error (the file changed since planning).
//
// A split written by hand may leave out RowGroups or Batches (every one),
// Rows (up to the end of its units or byte range) and, for CSV, Length
// (to the end of the file).
func OpenSplit(ctx context.Context, res *fsys.Resolver, s Split, opts ReadOptions) (Reader, error) {
	opts, err := opts.Normalize()
	if err != nil {
		return nil, err
	}
	if len(s.Partitions) > 0 {
		return openPartitioned(ctx, func(s Split, o ReadOptions) (Reader, error) { return OpenSplit(ctx, res, s, o) }, s, opts)
	}
	format := s.Format
	if format == "" {
		var ok bool
		if format, ok = FormatFromPath(s.URI); !ok {
			return nil, fmt.Errorf("%w: %s: the split names no format and the file name does not tell", ErrInput, s.URI)
		}
	}
	if s.RowOffset < 0 || s.Rows < 0 || s.Offset < 0 || s.Length < 0 {
		return nil, fmt.Errorf("%w: %s: negative offset, length or row count in the split", ErrInput, s.URI)
	}
	if format == FormatFlight {
		op, err := openFlight(ctx, s, opts)
		if err != nil {
			return nil, err
		}
		return newSplitReader(s, op, opts), nil
	}
	fs, name, err := res.Resolve(ctx, s.URI)
	if err != nil {
		return nil, err
	}
	f, err := fs.Open(ctx, name)
	if err != nil {
		if _, named := errors.AsType[*iofs.PathError](err); named {
			return nil, err // it says "open" and the path already
		}
		return nil, fmt.Errorf("open %s: %w", s.URI, err)
	}
	var op *opened
	switch format {
	case FormatParquet:
		// Local files sit in the page cache: reading a page costs a copy,
		// not a round trip.
		op, err = openParquet(ctx, f, s, opts, fs != fsys.Local())
	case FormatArrow:
		op, err = openIPC(f, s, opts)
	case FormatCSV:
		var in csvFile
		if in, err = csvInput(f, s.URI); err != nil {
			break
		}
		var src *csvSource
		if src, err = openCSV(ctx, in, s, opts); err == nil {
			op = &opened{src: src, schema: src.schema}
		} else if sf, ok := in.(*streamFile); ok {
			sf.closeStream()
		}
	default:
		err = fmt.Errorf("%w: %s: unknown format %q", ErrInput, s.URI, format)
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return newSplitReader(s, op, opts), nil
}

// newSplitReader returns the reader of split s, opened as op, whose
// batches have the schema opts ask for (ReadOptions.outSchema).
func newSplitReader(s Split, op *opened, opts ReadOptions) *splitReader {
	r := &splitReader{uri: s.URI, opened: *op, left: -1, alloc: opts.Allocator}
	r.schema = opts.outSchema(op.schema)
	if s.Rows > 0 {
		r.left = s.Rows
		r.want = s.Rows
	}
	return r
}

// splitReader turns a format reader's batches into the split's batches:
// the output columns under the output schema, cut at the split's end.
type splitReader struct {
	uri string
	opened
	alloc  memory.Allocator // for columns converted to the output types
	left   int64            // rows still to return; -1 when the split has no row count
	want   int64
	closed bool
}

var _ Reader = (*splitReader)(nil)

func (r *splitReader) Schema() *arrow.Schema { return r.schema }

func (r *splitReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	if r.closed {
		return nil, fmt.Errorf("read %s: %w", r.uri, ErrClosed)
	}
	for {
		if r.left == 0 {
			return nil, io.EOF
		}
		raw, err := r.src.next(ctx)
		if errors.Is(err, io.EOF) {
			if r.left > 0 {
				return nil, fmt.Errorf("%w: %s: the split should hold %d rows but only %d were read (did the file change since planning?)",
					ErrInput, r.uri, r.want, r.want-r.left)
			}
			return nil, io.EOF
		}
		if err != nil {
			return nil, err
		}
		n := raw.NumRows()
		if n == 0 {
			raw.Release()
			continue
		}
		rec := r.shape(raw)
		raw.Release()
		if r.left >= 0 {
			if n > r.left {
				cut := rec.NewSlice(0, r.left)
				rec.Release()
				rec, n = cut, r.left
			}
			r.left -= n
		}
		return rec, nil
	}
}

// shape returns raw's output columns under the output schema. It does not
// consume raw.
func (r *splitReader) shape(raw arrow.RecordBatch) arrow.RecordBatch {
	if r.proj == nil && raw.Schema() == r.schema {
		raw.Retain()
		return raw
	}
	cols := make([]arrow.Array, r.schema.NumFields())
	for i := range cols {
		j := i
		if r.proj != nil {
			j = r.proj[i]
		}
		cols[i] = raw.Column(j)
		if f64, ok := cols[i].(*array.Float64); ok && r.schema.Field(i).Type.ID() == arrow.FLOAT32 {
			cols[i] = narrowArray(f64, r.alloc)
			defer cols[i].Release()
		}
	}
	return array.NewRecordBatch(r.schema, cols, raw.NumRows())
}

// narrowArray returns a's values as float32, with its validity.
func narrowArray(a *array.Float64, alloc memory.Allocator) arrow.Array {
	values := memory.NewResizableBuffer(alloc)
	defer values.Release()
	values.Resize(a.Len() * 4)
	feedpq.NarrowFloats(arrow.Float32Traits.CastFromBytes(values.Bytes()), a.Float64Values())
	buffers := []*memory.Buffer{nil, values}
	if a.NullN() > 0 {
		// The validity bits from the array's offset on, as a buffer of
		// their own when the array is a slice.
		validity := memory.NewResizableBuffer(alloc)
		defer validity.Release()
		validity.Resize(int(bitutil.BytesForBits(int64(a.Len()))))
		bitutil.CopyBitmap(a.NullBitmapBytes(), a.Offset(), a.Len(), validity.Bytes(), 0)
		buffers[0] = validity
	}
	data := array.NewData(arrow.PrimitiveTypes.Float32, a.Len(), buffers, nil, a.NullN(), 0)
	defer data.Release()
	return array.MakeFromData(data)
}

func (r *splitReader) Close() error {
	if r.closed {
		return nil
	}
	r.closed = true
	return r.src.close()
}
