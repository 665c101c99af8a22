package wire

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math"
	"math/rand/v2"
	"net"
	"runtime"
	"strconv"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/bitutil"
	"github.com/apache/arrow-go/v18/arrow/float16"
	"github.com/apache/arrow-go/v18/arrow/memory"
)

// TestTensorBytes checks a tiny stream byte for byte against the layout
// in docs/feed-protocol.md, assembled here by hand.
func TestTensorBytes(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "a", Type: arrow.PrimitiveTypes.Int32},
		{Name: "b", Type: arrow.PrimitiveTypes.Float64, Nullable: true},
		{Name: "label", Type: arrow.FixedWidthTypes.Boolean},
	}, nil)
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	src := &memSource{schema: schema, failAfter: -1, batches: func(int) []arrow.RecordBatch {
		b := array.NewRecordBuilder(mem, schema)
		defer b.Release()
		b.Field(0).(*array.Int32Builder).AppendValues([]int32{1, -2}, nil)
		b.Field(1).(*array.Float64Builder).AppendValues([]float64{0.5, 0}, []bool{true, false})
		b.Field(2).(*array.BooleanBuilder).AppendValues([]bool{true, false}, nil)
		return []arrow.RecordBatch{b.NewRecordBatch()}
	}}
	srv, _ := startServer(t, ServerConfig{Mode: ModeTensor, Epochs: 1, Source: src, LabelColumn: "label"})

	var want bytes.Buffer
	le := func(v any) { _ = binary.Write(&want, binary.LittleEndian, v) }
	names := `["a","b","label"]`
	want.WriteString("SPTF")
	le(uint16(1))          // version
	le(uint16(1))          // flags: labels follow
	le(int32(0))           // epoch
	le(uint32(2))          // features
	le(uint32(len(names))) // names length
	want.WriteString(names)
	le(uint32(2))          // rows
	le([]float32{1, 0.5})  // row 0: a, b
	le(float32(-2))        // row 1: a
	le(uint32(0x7fc00000)) // row 1: b is null, the quiet NaN
	le([]float32{1, 0})    // labels
	le(uint32(0))          // end of epoch

	for epoch, wantBytes := range [][]byte{want.Bytes(), nil} {
		c, err := net.Dial("unix", srv.cfg.SocketPath)
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(c)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if epoch == 1 {
			// After the last epoch: the header with epoch -1, then the end.
			var empty bytes.Buffer
			empty.Write(want.Bytes()[:8])
			_ = binary.Write(&empty, binary.LittleEndian, int32(-1))
			empty.Write(want.Bytes()[12 : 20+len(names)])
			_ = binary.Write(&empty, binary.LittleEndian, uint32(0))
			wantBytes = empty.Bytes()
		}
		if !bytes.Equal(got, wantBytes) {
			t.Fatalf("connection %d:\n got % x\nwant % x", epoch, got, wantBytes)
		}
	}
}

// TestTensorConversion converts every admitted column type, nulls and
// sliced (offset) arrays included, and compares with the value each type
// holds.
func TestTensorConversion(t *testing.T) {
	mem := memory.NewCheckedAllocator(memory.NewGoAllocator())
	defer mem.AssertSize(t, 0)
	valid := []bool{true, false, true, true, true}
	type col struct {
		field arrow.Field
		build func(array.Builder)
		want  []float32 // row values before slicing; NaN where null
	}
	nan := float32(math.NaN())
	cols := []col{
		{arrow.Field{Name: "i8", Type: arrow.PrimitiveTypes.Int8}, func(b array.Builder) {
			b.(*array.Int8Builder).AppendValues([]int8{-128, 0, 127, 1, -1}, valid)
		}, []float32{-128, nan, 127, 1, -1}},
		{arrow.Field{Name: "i16", Type: arrow.PrimitiveTypes.Int16}, func(b array.Builder) {
			b.(*array.Int16Builder).AppendValues([]int16{-32768, 5, 32767, 2, 3}, nil)
		}, []float32{-32768, 5, 32767, 2, 3}},
		{arrow.Field{Name: "i32", Type: arrow.PrimitiveTypes.Int32}, func(b array.Builder) {
			b.(*array.Int32Builder).AppendValues([]int32{1 << 24, -7, 0, 9, 10}, valid)
		}, []float32{1 << 24, nan, 0, 9, 10}},
		{arrow.Field{Name: "i64", Type: arrow.PrimitiveTypes.Int64}, func(b array.Builder) {
			b.(*array.Int64Builder).AppendValues([]int64{1 << 40, -1, 3, 4, 5}, nil)
		}, []float32{1 << 40, -1, 3, 4, 5}},
		{arrow.Field{Name: "u8", Type: arrow.PrimitiveTypes.Uint8}, func(b array.Builder) {
			b.(*array.Uint8Builder).AppendValues([]uint8{255, 0, 1, 2, 3}, nil)
		}, []float32{255, 0, 1, 2, 3}},
		{arrow.Field{Name: "u16", Type: arrow.PrimitiveTypes.Uint16}, func(b array.Builder) {
			b.(*array.Uint16Builder).AppendValues([]uint16{65535, 0, 1, 2, 3}, nil)
		}, []float32{65535, 0, 1, 2, 3}},
		{arrow.Field{Name: "u32", Type: arrow.PrimitiveTypes.Uint32}, func(b array.Builder) {
			b.(*array.Uint32Builder).AppendValues([]uint32{1 << 31, 0, 1, 2, 3}, nil)
		}, []float32{1 << 31, 0, 1, 2, 3}},
		{arrow.Field{Name: "u64", Type: arrow.PrimitiveTypes.Uint64}, func(b array.Builder) {
			b.(*array.Uint64Builder).AppendValues([]uint64{1 << 63, 0, 1, 2, 3}, nil)
		}, []float32{1 << 63, 0, 1, 2, 3}},
		{arrow.Field{Name: "f16", Type: arrow.FixedWidthTypes.Float16}, func(b array.Builder) {
			b.(*array.Float16Builder).AppendValues([]float16.Num{
				float16.New(1.5), float16.New(-2), float16.New(0.25), float16.New(4), float16.New(8)}, valid)
		}, []float32{1.5, nan, 0.25, 4, 8}},
		{arrow.Field{Name: "f32", Type: arrow.PrimitiveTypes.Float32}, func(b array.Builder) {
			b.(*array.Float32Builder).AppendValues([]float32{0.1, float32(math.Inf(-1)), 3, 4, 5}, nil)
		}, []float32{0.1, float32(math.Inf(-1)), 3, 4, 5}},
		{arrow.Field{Name: "f64", Type: arrow.PrimitiveTypes.Float64}, func(b array.Builder) {
			b.(*array.Float64Builder).AppendValues([]float64{1e300, 0.1, 3, 4, 5}, valid)
		}, []float32{float32(math.Inf(1)), nan, 3, 4, 5}},
		{arrow.Field{Name: "bool", Type: arrow.FixedWidthTypes.Boolean}, func(b array.Builder) {
			b.(*array.BooleanBuilder).AppendValues([]bool{true, true, false, true, false}, valid)
		}, []float32{1, nan, 0, 1, 0}},
	}
	fields := make([]arrow.Field, len(cols))
	for i, c := range cols {
		fields[i] = c.field
		fields[i].Nullable = true
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(mem, schema)
	defer b.Release()
	for i, c := range cols {
		c.build(b.Field(i))
	}
	whole := b.NewRecordBatch()
	defer whole.Release()

	for _, tc := range []struct {
		name      string
		from, to  int64
		labelName string
	}{
		{"whole batch", 0, 5, "bool"},
		{"sliced batch", 1, 4, "f64"},
		{"one row no label", 3, 4, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			enc, err := newTensorEncoder(schema, tc.labelName)
			if err != nil {
				t.Fatal(err)
			}
			rec := whole.NewSlice(tc.from, tc.to)
			defer rec.Release()
			_, frame, err := enc.encode(rec, nil)
			if err != nil {
				t.Fatal(err)
			}
			rows := int(tc.to - tc.from)
			if got := binary.LittleEndian.Uint32(frame); got != uint32(rows) {
				t.Fatalf("row count %d, want %d", got, rows)
			}
			vals := make([]float32, (len(frame)-4)/4)
			_ = binary.Read(bytes.NewReader(frame[4:]), binary.LittleEndian, vals)
			var feats []col
			var label *col
			for i := range cols {
				if cols[i].field.Name == tc.labelName {
					label = &cols[i]
				} else {
					feats = append(feats, cols[i])
				}
			}
			nf := len(feats)
			want := rows * nf
			if label != nil {
				want += rows
			}
			if len(vals) != want {
				t.Fatalf("%d values, want %d", len(vals), want)
			}
			for r := range rows {
				for j, c := range feats {
					if got, w := vals[r*nf+j], c.want[int(tc.from)+r]; !sameFloat(got, w) {
						t.Errorf("row %d column %s: %v, want %v", r, c.field.Name, got, w)
					}
				}
				if label != nil {
					if got, w := vals[rows*nf+r], label.want[int(tc.from)+r]; !sameFloat(got, w) {
						t.Errorf("row %d label %s: %v, want %v", r, label.field.Name, got, w)
					}
				}
			}
		})
	}
}

// TestTensorWideRows crosses the row-block boundary of the converter with
// a schema wide enough that a block holds few rows.
func TestTensorWideRows(t *testing.T) {
	const nf, rows = 3000, 40
	fields := make([]arrow.Field, nf)
	for j := range fields {
		fields[j] = arrow.Field{Name: "f" + string(rune('a'+j%26)) + strings.Repeat("x", j/26), Type: arrow.PrimitiveTypes.Int32}
	}
	schema := arrow.NewSchema(fields, nil)
	b := array.NewRecordBuilder(memory.DefaultAllocator, schema)
	defer b.Release()
	for j := range nf {
		for r := range rows {
			b.Field(j).(*array.Int32Builder).Append(int32(r*nf + j))
		}
	}
	rec := b.NewRecordBatch()
	defer rec.Release()
	enc, err := newTensorEncoder(schema, "")
	if err != nil {
		t.Fatal(err)
	}
	_, frame, err := enc.encode(rec, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := range rows * nf {
		if got := math.Float32frombits(binary.LittleEndian.Uint32(frame[4+4*i:])); got != float32(i) {
			t.Fatalf("value %d = %v", i, got)
		}
	}
}

func TestCheckTensorSchema(t *testing.T) {
	f := func(name string, typ arrow.DataType) arrow.Field { return arrow.Field{Name: name, Type: typ} }
	for _, tc := range []struct {
		name    string
		fields  []arrow.Field
		label   string
		want    string // empty: no error
		numeric bool   // the error is ErrNotNumeric
	}{
		{"numeric", []arrow.Field{f("a", arrow.PrimitiveTypes.Int8), f("b", arrow.FixedWidthTypes.Boolean)}, "b", "", false},
		{"string feature", []arrow.Field{f("a", arrow.PrimitiveTypes.Int8), f("city", arrow.BinaryTypes.String)}, "", `column "city" has type utf8`, true},
		{"string label", []arrow.Field{f("a", arrow.PrimitiveTypes.Int8), f("y", arrow.BinaryTypes.String)}, "y", `label column "y"`, true},
		{"timestamp", []arrow.Field{f("t", arrow.FixedWidthTypes.Timestamp_ms)}, "", `column "t"`, true},
		{"list", []arrow.Field{f("v", arrow.ListOf(arrow.PrimitiveTypes.Float32))}, "", `column "v"`, true},
		{"missing label", []arrow.Field{f("a", arrow.PrimitiveTypes.Int8)}, "y", `label column "y" is not among the columns [a]`, false},
		{"label only", []arrow.Field{f("y", arrow.PrimitiveTypes.Int8)}, "y", "no feature columns", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := CheckTensorSchema(arrow.NewSchema(tc.fields, nil), tc.label)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("unexpected error: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want one containing %q", err, tc.want)
			}
			if errors.Is(err, ErrNotNumeric) != tc.numeric {
				t.Fatalf("errors.Is(%v, ErrNotNumeric) = %t", err, !tc.numeric)
			}
		})
	}
}

// TestTensorServerRefusesBadSchema shows the check also guards the server.
func TestTensorServerRefusesBadSchema(t *testing.T) {
	src := &memSource{schema: arrow.NewSchema([]arrow.Field{{Name: "s", Type: arrow.BinaryTypes.String}}, nil)}
	_, err := NewServer(ServerConfig{SocketPath: "unused.sock", Mode: ModeTensor, Epochs: 1, Source: src})
	if !errors.Is(err, ErrNotNumeric) || !strings.Contains(err.Error(), `"s"`) {
		t.Fatalf("NewServer with a string column: %v", err)
	}
}

// BenchmarkTensorEncode measures the Arrow-to-float32 conversion alone,
// for float32 columns (the common case) and for a mix of types and nulls.
func BenchmarkTensorEncode(b *testing.B) {
	const rows, nf = 16384, 32
	for _, mixed := range []bool{false, true} {
		name := "float32"
		if mixed {
			name = "mixed"
		}
		b.Run(name, func(b *testing.B) {
			fields := make([]arrow.Field, nf+1)
			for j := range fields {
				typ := arrow.DataType(arrow.PrimitiveTypes.Float32)
				if mixed {
					typ = []arrow.DataType{arrow.PrimitiveTypes.Float32, arrow.PrimitiveTypes.Int64,
						arrow.PrimitiveTypes.Float64, arrow.PrimitiveTypes.Uint8}[j%4]
				}
				fields[j] = arrow.Field{Name: "c" + strconv.Itoa(j), Type: typ, Nullable: true}
			}
			schema := arrow.NewSchema(fields, nil)
			bld := array.NewRecordBuilder(memory.DefaultAllocator, schema)
			defer bld.Release()
			for j := range fields {
				for r := range rows {
					null := mixed && r%10 == 0
					switch fb := bld.Field(j).(type) {
					case *array.Float32Builder:
						fb.Append(float32(r))
					case *array.Int64Builder:
						if null {
							fb.AppendNull()
						} else {
							fb.Append(int64(r))
						}
					case *array.Float64Builder:
						fb.Append(float64(r))
					case *array.Uint8Builder:
						fb.Append(uint8(r))
					}
				}
			}
			rec := bld.NewRecordBatch()
			defer rec.Release()
			enc, err := newTensorEncoder(schema, fields[nf].Name)
			if err != nil {
				b.Fatal(err)
			}
			b.SetBytes(int64(rows * (nf + 1) * 4))
			var buf []float32
			for b.Loop() {
				if buf, _, err = enc.encode(rec, buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestTensorClientRejectsBadStreams feeds the tensor client malformed
// bytes: each must fail with an error that says what is wrong.
func TestTensorClientRejectsBadStreams(t *testing.T) {
	header := func(version uint16, flags uint16, nf uint32, names string) []byte {
		var b bytes.Buffer
		b.WriteString("SPTF")
		for _, v := range []any{version, flags, int32(0), nf, uint32(len(names))} {
			_ = binary.Write(&b, binary.LittleEndian, v)
		}
		b.WriteString(names)
		return b.Bytes()
	}
	good := header(1, 1, 1, `["x","y"]`)
	huge := append(append([]byte{}, good...), 0xff, 0xff, 0xff, 0xff) // 2^32-1 rows
	for _, tc := range []struct {
		name   string
		data   []byte
		is     error
		inNext bool
		want   string
	}{
		{"empty", nil, ErrTruncated, false, "inside its header"},
		{"bad magic", []byte("HTTP/1.1 200 OK\r\n\r\n"), ErrBadStream, false, "bad magic"},
		{"arrow stream", []byte{0xff, 0xff, 0xff, 0xff, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}, ErrBadStream, false, "DialArrow"},
		{"newer version", header(2, 0, 1, `["x"]`), ErrBadStream, false, "version 2"},
		{"names disagree", header(1, 1, 2, `["x","y"]`), ErrBadStream, false, "2 names for 2 features"},
		{"names not json", header(1, 0, 1, `[x]`), ErrBadStream, false, "column names"},
		{"no end of epoch", good, ErrTruncated, true, "no end-of-epoch frame"},
		{"cut batch", append(append([]byte{}, good...), 2, 0, 0, 0, 1, 2, 3), ErrTruncated, true, "inside a batch of 2 rows"},
		{"absurd batch", huge, ErrBadStream, true, "too large"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			ep, err := DialTensor(ctx, serveBytes(t, tc.data))
			if tc.inNext {
				if err != nil {
					t.Fatalf("DialTensor: %v", err)
				}
				defer ep.Close()
				_, err = ep.Next(ctx)
			}
			if !errors.Is(err, tc.is) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %v, want %v containing %q", err, tc.is, tc.want)
			}
		})
	}
}

// Large batches are converted on several goroutines, each a range of
// rows, with float32 columns read as they are and the others converted a
// block at a time; the rows come out as from one.
func TestToRowsParallelMatchesSerial(t *testing.T) {
	for _, shape := range []struct{ rows, cols int }{{40000, 5}, {70001, 3}, {300000, 1}, {1000, 7}, {50000, 19}} {
		cols := make([]featureColumn, shape.cols)
		for j := range cols {
			values := make([]float32, shape.rows)
			for r := range values {
				values[r] = float32(r*shape.cols + j)
			}
			if j%3 != 1 {
				cols[j] = featureColumn{values: values}
				continue
			}
			b := array.NewFloat64Builder(memory.DefaultAllocator)
			for _, v := range values {
				b.Append(float64(v))
			}
			col := b.NewArray()
			b.Release()
			defer col.Release()
			cols[j] = featureColumn{col: col}
		}
		got := make([]float32, shape.rows*shape.cols)
		workers := toRowsParallel(got, cols, shape.rows, nil)
		if shape.rows*shape.cols >= parallelValues && runtime.GOMAXPROCS(0) > 1 && len(workers) < 2 {
			t.Errorf("%d x %d: converted on %d goroutines", shape.rows, shape.cols, len(workers))
		}
		for i, v := range got {
			if v != float32(i) {
				t.Fatalf("%d x %d: value %d is %v, want %v", shape.rows, shape.cols, i, v, float32(i))
			}
		}
	}
}

// markNulls marks exactly the values whose validity bit is clear, at any
// bit offset, whether it skips whole bytes of valid values or not.
func TestMarkNulls(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, nullEvery := range []int{0, 3, 50, 1000} {
		for _, off := range []int{0, 1, 7, 8, 13} {
			const n = 3000
			valid := make([]byte, (off+n+7)/8)
			for i := range valid {
				valid[i] = 0xff
			}
			if nullEvery > 0 {
				for i := 0; i < n; i++ {
					if rng.IntN(nullEvery) == 0 {
						bitutil.ClearBit(valid, off+i)
					}
				}
			}
			dst := make([]float32, n)
			markNulls(dst, valid, off)
			for i, v := range dst {
				if null := !bitutil.BitIsSet(valid, off+i); null != math.IsNaN(float64(v)) {
					t.Fatalf("1 in %d null, offset %d: value %d is %v, null %v", nullEvery, off, i, v, null)
				}
			}
		}
	}
}
