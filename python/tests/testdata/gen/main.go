// Command gen writes the Arrow IPC fixtures that the Python package's tests
// read: small streams (.arrows) and files (.arrow) written by arrow-go, each
// beside a JSON file (.json) listing the values arrow-go wrote, so that the
// tests compare the pure-numpy reader against an independent implementation.
//
// Regenerate them from the repository root with
//
//	go run ./python/tests/testdata/gen -out python/tests/testdata
package main

import (
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log"
	"math"
	"os"
	"path/filepath"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// column is one column of a fixture: its field and its values, nil for null.
type column struct {
	field arrow.Field
	vals  []any
}

// batch is one record batch of a fixture. A batch with slice set is cut
// out of a longer one, so the writer has to handle an array offset.
type batch struct {
	cols  []column
	slice [2]int64
}

// fixture is one file to write.
type fixture struct {
	name    string
	epoch   string // the spindle.epoch metadata value; empty for none
	file    bool   // Arrow IPC file format instead of the stream format
	opts    []ipc.Option
	schema  []arrow.Field
	batches []batch
}

func main() {
	out := flag.String("out", ".", "directory to write the fixtures into")
	flag.Parse()
	if err := run(*out); err != nil {
		log.Fatal(err)
	}
}

func run(out string) error {
	mem := memory.NewGoAllocator()
	for _, fx := range fixtures() {
		if err := write(mem, out, fx); err != nil {
			return fmt.Errorf("write fixture %s: %w", fx.name, err)
		}
	}
	return nil
}

var primitiveFields = []arrow.Field{
	{Name: "i8", Type: arrow.PrimitiveTypes.Int8},
	{Name: "i16", Type: arrow.PrimitiveTypes.Int16},
	{Name: "i32", Type: arrow.PrimitiveTypes.Int32, Nullable: true},
	{Name: "i64", Type: arrow.PrimitiveTypes.Int64},
	{Name: "u8", Type: arrow.PrimitiveTypes.Uint8},
	{Name: "u16", Type: arrow.PrimitiveTypes.Uint16, Nullable: true},
	{Name: "u32", Type: arrow.PrimitiveTypes.Uint32},
	{Name: "u64", Type: arrow.PrimitiveTypes.Uint64},
	{Name: "f16", Type: arrow.FixedWidthTypes.Float16, Nullable: true},
	{Name: "f32", Type: arrow.PrimitiveTypes.Float32, Nullable: true},
	{Name: "f64", Type: arrow.PrimitiveTypes.Float64},
	{Name: "b", Type: arrow.FixedWidthTypes.Boolean, Nullable: true},
	{Name: "label", Type: arrow.PrimitiveTypes.Int64},
}

// primitives returns a batch of the primitive columns; k varies the values.
func primitives(rows, k int) batch {
	vals := make([][]any, len(primitiveFields))
	for r := 0; r < rows; r++ {
		v := r + 10*k
		null := func(every int) bool { return every > 0 && (r+k)%every == 1 }
		add := func(i int, x any, nullEvery int) {
			if null(nullEvery) {
				x = nil
			}
			vals[i] = append(vals[i], x)
		}
		add(0, int8(v-64), 0)
		add(1, int16(-1000*v), 0)
		add(2, int32(100000*v-7), 3)
		add(3, int64(v)*int64(1)<<40-int64(r), 0)
		add(4, uint8(250-v), 0)
		add(5, uint16(60000-v), 4)
		add(6, uint32(4000000000)-uint32(v), 0)
		add(7, uint64(math.MaxUint64)-uint64(v), 0)
		add(8, float16.New(float32(v)*0.5-1), 2)
		add(9, float32(v)*0.25-0.125, 3)
		add(10, float64(v)/10+1e-9, 0)
		add(11, v%3 == 0, 5)
		add(12, int64(v%2), 0)
	}
	// Extreme values in the first row of the first batch.
	if k == 0 && rows > 0 {
		vals[0][0], vals[1][0], vals[3][0] = int8(math.MinInt8), int16(math.MaxInt16), int64(math.MinInt64)
		vals[7][0] = uint64(math.MaxUint64)
	}
	b := batch{}
	for i, f := range primitiveFields {
		b.cols = append(b.cols, column{field: f, vals: vals[i]})
	}
	return b
}

func sliced(b batch, off, n int64) batch {
	b.slice = [2]int64{off, off + n}
	return b
}

var varFields = []arrow.Field{
	{Name: "s", Type: arrow.BinaryTypes.String, Nullable: true},
	{Name: "ls", Type: arrow.BinaryTypes.LargeString, Nullable: true},
	{Name: "bin", Type: arrow.BinaryTypes.Binary, Nullable: true},
	{Name: "d32", Type: arrow.FixedWidthTypes.Date32, Nullable: true},
	{Name: "d64", Type: arrow.FixedWidthTypes.Date64},
	{Name: "ts", Type: &arrow.TimestampType{Unit: arrow.Millisecond}, Nullable: true},
	{Name: "tsn", Type: &arrow.TimestampType{Unit: arrow.Nanosecond, TimeZone: "UTC"}},
	{Name: "dur", Type: &arrow.DurationType{Unit: arrow.Microsecond}, Nullable: true},
	{Name: "n", Type: arrow.Null, Nullable: true},
}

func variable() batch {
	cols := [][]any{
		{"héllo", "", nil, "spindle ✓", "x"},
		{"a", nil, "long string " + string(make([]byte, 0)), "", "z"},
		{[]byte{0, 1, 2}, nil, []byte{}, []byte{0xff}, []byte("ab")},
		{arrow.Date32(0), arrow.Date32(19000), nil, arrow.Date32(-1), arrow.Date32(365)},
		{arrow.Date64(0), arrow.Date64(86400000), arrow.Date64(-86400000), arrow.Date64(1e12), arrow.Date64(3)},
		{arrow.Timestamp(1700000000123), nil, arrow.Timestamp(0), arrow.Timestamp(-5), arrow.Timestamp(42)},
		{arrow.Timestamp(1), arrow.Timestamp(1700000000123456789), arrow.Timestamp(0), arrow.Timestamp(-1), arrow.Timestamp(7)},
		{arrow.Duration(1500000), arrow.Duration(-1), nil, arrow.Duration(0), arrow.Duration(86400000000)},
		{nil, nil, nil, nil, nil},
	}
	b := batch{}
	for i, f := range varFields {
		b.cols = append(b.cols, column{field: f, vals: cols[i]})
	}
	return b
}

var dictFields = []arrow.Field{
	{Name: "cat", Type: &arrow.DictionaryType{IndexType: arrow.PrimitiveTypes.Int32, ValueType: arrow.BinaryTypes.String}, Nullable: true},
	{Name: "x", Type: arrow.PrimitiveTypes.Int32},
}

// dictBatch returns a batch of dictFields: each batch's dictionary holds
// only its own values.
func dictBatch(cat, x []any) batch {
	return batch{cols: []column{{field: dictFields[0], vals: cat}, {field: dictFields[1], vals: x}}}
}

func fixtures() []fixture {
	return []fixture{
		{name: "primitives.arrows", epoch: "0", schema: primitiveFields,
			batches: []batch{primitives(5, 0), sliced(primitives(10, 1), 3, 4), primitives(0, 2)}},
		{name: "epoch1.arrows", epoch: "1", schema: primitiveFields, batches: []batch{primitives(7, 3)}},
		{name: "end.arrows", epoch: "-1", schema: primitiveFields},
		{name: "variable.arrows", epoch: "0", schema: varFields, batches: []batch{variable()}},
		{name: "primitives.arrow", file: true, schema: primitiveFields,
			batches: []batch{primitives(3, 4), primitives(6, 5), primitives(2, 6)}},
		{name: "lz4.arrows", epoch: "0", schema: primitiveFields, batches: []batch{primitives(64, 7)},
			opts: []ipc.Option{ipc.WithLZ4()}},
		// The dictionary changes from batch to batch (the writer sends a
		// replacement), and is sent again unchanged for the last batch's
		// values only when they differ.
		{name: "dictionary.arrows", epoch: "0", schema: dictFields, batches: []batch{
			dictBatch([]any{"red", "green", nil, "red"}, []any{int32(1), int32(2), int32(3), int32(4)}),
			dictBatch([]any{"blue", "héllo", "blue"}, []any{int32(5), int32(6), int32(7)}),
			sliced(dictBatch([]any{"a", "b", "c", nil, "a"}, []any{int32(8), int32(9), int32(10), int32(11), int32(12)}), 1, 4),
		}},
		{name: "nested.arrows", epoch: "0", schema: []arrow.Field{
			{Name: "x", Type: arrow.PrimitiveTypes.Int32},
			{Name: "xs", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)},
		}, batches: []batch{{cols: []column{
			{field: arrow.Field{Name: "x", Type: arrow.PrimitiveTypes.Int32}, vals: []any{int32(1), int32(2)}},
			{field: arrow.Field{Name: "xs", Type: arrow.ListOf(arrow.PrimitiveTypes.Int32)}, vals: []any{[]int32{1, 2}, []int32{}}},
		}}}},
	}
}

// expected is the JSON written beside each fixture.
type expected struct {
	Epoch   string          `json:"epoch"`
	Fields  []expectedField `json:"fields"`
	Batches []expectedBatch `json:"batches"`
}

type expectedField struct {
	Name string `json:"name"`
	Type string `json:"type"`
}

type expectedBatch struct {
	Rows    int64            `json:"rows"`
	Columns map[string][]any `json:"columns"`
}

func write(mem memory.Allocator, dir string, fx fixture) error {
	var md *arrow.Metadata
	if fx.epoch != "" {
		m := arrow.NewMetadata([]string{"spindle.epoch"}, []string{fx.epoch})
		md = &m
	}
	schema := arrow.NewSchema(fx.schema, md)
	exp := expected{Epoch: fx.epoch, Batches: []expectedBatch{}}
	for _, f := range fx.schema {
		exp.Fields = append(exp.Fields, expectedField{Name: f.Name, Type: f.Type.String()})
	}

	path := filepath.Join(dir, fx.name)
	f, err := os.Create(path)
	if err != nil {
		return err
	}
	defer f.Close()
	opts := append([]ipc.Option{ipc.WithSchema(schema), ipc.WithAllocator(mem)}, fx.opts...)
	var w interface {
		Write(arrow.RecordBatch) error
		Close() error
	}
	if fx.file {
		if w, err = ipc.NewFileWriter(f, opts...); err != nil {
			return err
		}
	} else {
		w = ipc.NewWriter(f, opts...)
	}
	for i, b := range fx.batches {
		rec, eb, err := record(mem, schema, b)
		if err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
		err = w.Write(rec)
		rec.Release()
		if err != nil {
			return fmt.Errorf("batch %d: %w", i, err)
		}
		exp.Batches = append(exp.Batches, eb)
	}
	if err := w.Close(); err != nil {
		return err
	}
	if err := f.Close(); err != nil && !errors.Is(err, os.ErrClosed) {
		return err
	}
	js, err := json.MarshalIndent(exp, "", " ")
	if err != nil {
		return err
	}
	return os.WriteFile(path+".json", append(js, '\n'), 0o644)
}

// record builds the record batch b and the values it holds, as JSON sees them.
func record(mem memory.Allocator, schema *arrow.Schema, b batch) (arrow.RecordBatch, expectedBatch, error) {
	rows := int64(0)
	if len(b.cols) > 0 {
		rows = int64(len(b.cols[0].vals))
	}
	cols := make([]arrow.Array, len(b.cols))
	defer func() {
		for _, c := range cols {
			if c != nil {
				c.Release()
			}
		}
	}()
	eb := expectedBatch{Columns: map[string][]any{}}
	lo, hi := int64(0), rows
	if b.slice != [2]int64{} {
		lo, hi = b.slice[0], b.slice[1]
	}
	for i, c := range b.cols {
		arr, err := build(mem, c.field.Type, c.vals)
		if err != nil {
			return nil, eb, fmt.Errorf("column %s: %w", c.field.Name, err)
		}
		cols[i] = arr
		var js []any
		for _, v := range c.vals[lo:hi] {
			js = append(js, jsonValue(v))
		}
		if js == nil {
			js = []any{}
		}
		eb.Columns[c.field.Name] = js
	}
	rec := array.NewRecordBatch(schema, cols, rows)
	if lo != 0 || hi != rows {
		s := rec.NewSlice(lo, hi)
		rec.Release()
		rec = s
	}
	eb.Rows = hi - lo
	return rec, eb, nil
}

func jsonValue(v any) any {
	switch x := v.(type) {
	case nil:
		return nil
	case float16.Num:
		return x.Float32()
	case []byte:
		return hex.EncodeToString(x)
	case uint64:
		return json.Number(fmt.Sprint(x))
	case int64:
		return json.Number(fmt.Sprint(x))
	}
	return v
}

func build(mem memory.Allocator, dt arrow.DataType, vals []any) (arrow.Array, error) {
	bld := array.NewBuilder(mem, dt)
	defer bld.Release()
	for _, v := range vals {
		if v == nil {
			bld.AppendNull()
			continue
		}
		switch b := bld.(type) {
		case *array.Int8Builder:
			b.Append(v.(int8))
		case *array.Int16Builder:
			b.Append(v.(int16))
		case *array.Int32Builder:
			b.Append(v.(int32))
		case *array.Int64Builder:
			b.Append(v.(int64))
		case *array.Uint8Builder:
			b.Append(v.(uint8))
		case *array.Uint16Builder:
			b.Append(v.(uint16))
		case *array.Uint32Builder:
			b.Append(v.(uint32))
		case *array.Uint64Builder:
			b.Append(v.(uint64))
		case *array.Float16Builder:
			b.Append(v.(float16.Num))
		case *array.Float32Builder:
			b.Append(v.(float32))
		case *array.Float64Builder:
			b.Append(v.(float64))
		case *array.BooleanBuilder:
			b.Append(v.(bool))
		case *array.StringBuilder:
			b.Append(v.(string))
		case *array.LargeStringBuilder:
			b.Append(v.(string))
		case *array.BinaryBuilder:
			b.Append(v.([]byte))
		case *array.Date32Builder:
			b.Append(v.(arrow.Date32))
		case *array.Date64Builder:
			b.Append(v.(arrow.Date64))
		case *array.TimestampBuilder:
			b.Append(v.(arrow.Timestamp))
		case *array.DurationBuilder:
			b.Append(v.(arrow.Duration))
		case *array.BinaryDictionaryBuilder:
			if err := b.AppendString(v.(string)); err != nil {
				return nil, err
			}
		case *array.ListBuilder:
			b.Append(true)
			b.ValueBuilder().(*array.Int32Builder).AppendValues(v.([]int32), nil)
		default:
			return nil, fmt.Errorf("no fixture builder for %s", dt)
		}
	}
	return bld.NewArray(), nil
}
