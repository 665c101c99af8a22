package feed

import (
	"context"
	"fmt"
	"path"
	"sort"
	"strconv"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// PartitionValues returns the key=value directories on a file's path (the
// Hive-style partitions Spark and Hive write: dt=2026-11-01/part-0.parquet),
// the innermost winning when a key repeats.
func PartitionValues(name string) map[string]string {
	out := map[string]string{}
	dir := path.Dir(name)
	for _, elem := range strings.Split(dir, "/") {
		k, v, ok := strings.Cut(elem, "=")
		if !ok || k == "" {
			continue
		}
		if u, err := unescapePartition(v); err == nil {
			v = u
		}
		out[k] = v
	}
	return out
}

// unescapePartition undoes Hive's escaping of partition values (%XX).
func unescapePartition(v string) (string, error) {
	if !strings.Contains(v, "%") {
		return v, nil
	}
	var b strings.Builder
	for i := 0; i < len(v); i++ {
		if v[i] == '%' && i+2 < len(v) {
			n, err := strconv.ParseUint(v[i+1:i+3], 16, 8)
			if err != nil {
				return v, err
			}
			b.WriteByte(byte(n))
			i += 2
			continue
		}
		b.WriteByte(v[i])
	}
	return b.String(), nil
}

// HiveDefaultPartition is the value Hive writes for a null partition value.
const HiveDefaultPartition = "__HIVE_DEFAULT_PARTITION__"

// partitionReader adds a split's partition values as constant columns to
// the batches of the file's own columns, in the order of the output schema.
type partitionReader struct {
	inner  Reader
	schema *arrow.Schema
	values map[string]string
	alloc  memory.Allocator
}

var _ Reader = (*partitionReader)(nil)

// openPartitioned opens a split whose output holds partition columns: the
// file's own columns through OpenSplit, the rest from s.Partitions.
func openPartitioned(ctx context.Context, open func(Split, ReadOptions) (Reader, error), s Split, opts ReadOptions) (Reader, error) {
	isPart := func(name string) bool { _, ok := s.Partitions[name]; return ok }
	inner := opts
	inner.Columns = nil
	for _, c := range opts.Columns {
		if !isPart(c) {
			inner.Columns = append(inner.Columns, c)
		}
	}
	if isPart(opts.LabelColumn) {
		inner.LabelColumn = ""
	}
	var out *arrow.Schema
	if opts.Schema != nil {
		var fileFields []arrow.Field
		for _, f := range opts.Schema.Fields() {
			if !isPart(f.Name) {
				fileFields = append(fileFields, f)
			}
		}
		inner.Schema = arrow.NewSchema(fileFields, nil)
		out = opts.Schema
		// Name the file's columns as the schema has them: with only
		// partition columns selected besides the label, the projected
		// list would otherwise be empty, which means every column.
		inner.Columns = inner.Columns[:0]
		for _, f := range fileFields {
			inner.Columns = append(inner.Columns, f.Name)
		}
	}
	file := s
	file.Partitions = nil
	r, err := open(file, inner)
	if err != nil {
		return nil, err
	}
	if out == nil {
		fields := r.Schema().Fields()
		keys := make([]string, 0, len(s.Partitions))
		for k := range s.Partitions {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if len(opts.Columns) == 0 || containsString(opts.Columns, k) || k == opts.LabelColumn {
				fields = append(fields, arrow.Field{Name: k, Type: arrow.BinaryTypes.String, Nullable: true})
			}
		}
		out = arrow.NewSchema(fields, nil)
	}
	for _, f := range out.Fields() {
		if isPart(f.Name) {
			switch f.Type.ID() {
			case arrow.INT64, arrow.STRING:
			default:
				r.Close()
				return nil, fmt.Errorf("%w: %s: partition column %q cannot be %s (want int64 or utf8)", ErrInput, s.URI, f.Name, f.Type)
			}
		}
	}
	alloc := opts.Allocator
	if alloc == nil {
		alloc = memory.DefaultAllocator
	}
	return &partitionReader{inner: r, schema: opts.outSchema(out), values: s.Partitions, alloc: alloc}, nil
}

func (p *partitionReader) Schema() *arrow.Schema { return p.schema }

func (p *partitionReader) Next(ctx context.Context) (arrow.RecordBatch, error) {
	rec, err := p.inner.Next(ctx)
	if err != nil {
		return nil, err
	}
	defer rec.Release()
	n := int(rec.NumRows())
	cols := make([]arrow.Array, p.schema.NumFields())
	var made []arrow.Array
	defer func() {
		for _, a := range made {
			a.Release()
		}
	}()
	for i, f := range p.schema.Fields() {
		v, ok := p.values[f.Name]
		if !ok {
			idx := rec.Schema().FieldIndices(f.Name)
			if len(idx) == 0 {
				return nil, fmt.Errorf("partitioned read: no column %q in the file's batch", f.Name)
			}
			cols[i] = rec.Column(idx[0])
			continue
		}
		a, err := constantColumn(p.alloc, f.Type, v, n)
		if err != nil {
			return nil, err
		}
		made = append(made, a)
		cols[i] = a
	}
	return array.NewRecordBatch(p.schema, cols, int64(n)), nil
}

func (p *partitionReader) Close() error { return p.inner.Close() }

// constantColumn returns n copies of a partition value as a column of t;
// Hive's null partition becomes nulls.
func constantColumn(alloc memory.Allocator, t arrow.DataType, v string, n int) (arrow.Array, error) {
	null := v == HiveDefaultPartition
	switch t.ID() {
	case arrow.INT64:
		b := array.NewInt64Builder(alloc)
		defer b.Release()
		if null {
			b.AppendNulls(n)
			return b.NewArray(), nil
		}
		x, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("%w: partition value %q is not an int64", ErrInput, v)
		}
		b.Reserve(n)
		for range n {
			b.UnsafeAppend(x)
		}
		return b.NewArray(), nil
	default:
		b := array.NewStringBuilder(alloc)
		defer b.Release()
		if null {
			b.AppendNulls(n)
			return b.NewArray(), nil
		}
		b.Reserve(n)
		b.ReserveData(n * len(v))
		for range n {
			b.Append(v)
		}
		return b.NewArray(), nil
	}
}

func containsString(xs []string, x string) bool {
	for _, s := range xs {
		if s == x {
			return true
		}
	}
	return false
}
