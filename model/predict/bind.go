package predict

import (
	"fmt"
	"slices"
	"strings"

	"github.com/apache/arrow-go/v18/arrow"

	"github.com/spindle-ml/spindle/model/store"
)

// Input shapes the worker builds from columns.
const (
	// ShapeMatrix stacks several columns into one [N, F] tensor.
	ShapeMatrix = "matrix"
	// ShapeVector feeds one column as an [N] tensor.
	ShapeVector = "vector"
	// ShapeColumn feeds one column as an [N, 1] tensor.
	ShapeColumn = "column"
)

// InputBinding says which columns feed one model input.
type InputBinding struct {
	Name    string   `json:"name"`
	Columns []string `json:"columns"`
	// DType is the numpy dtype the worker converts the columns to.
	DType string `json:"dtype"`
	Shape string `json:"shape"`
}

// OutputBinding names the output column of one model output.
type OutputBinding struct {
	Name   string `json:"name"`
	Column string `json:"column"`
}

// BindOptions are the user's choices that bear on binding.
type BindOptions struct {
	// Source names the input in errors (the --input values).
	Source string
	// Features are the columns that feed a model's single matrix input
	// (--columns); empty: the manifest's, else every numeric column not
	// kept, the label's either.
	Features []string
	// Keep are the input columns copied to the output (--keep); nil: every
	// column that feeds no model input.
	Keep []string
	// Label is the label column (--label-column), never a default feature.
	Label string
}

// Binding is how a model is fed from a data set and what the output holds.
type Binding struct {
	Inputs  []InputBinding  `json:"inputs"`
	Outputs []OutputBinding `json:"outputs"`
	Keep    []string        `json:"keep"`
	// Skipped are model outputs left out of the output (not tensors).
	Skipped []string `json:"-"`
}

// Columns are the input columns the job reads: the kept ones and those
// feeding the model, each once.
func (b Binding) Columns() []string {
	var out []string
	add := func(c string) {
		if !slices.Contains(out, c) {
			out = append(out, c)
		}
	}
	for _, c := range b.Keep {
		add(c)
	}
	for _, in := range b.Inputs {
		for _, c := range in.Columns {
			add(c)
		}
	}
	return out
}

// Bind matches the model's inputs to the columns of schema. A model input
// named like a column is fed that column; a model whose only input is a
// matrix [N, F] is fed F columns (BindOptions.Features, the manifest's
// feature columns, or the numeric columns not kept). Every mismatch wraps
// ErrBadInput and names the model input and the input data.
func Bind(sig Signature, man *store.Manifest, schema *arrow.Schema, opts BindOptions) (Binding, error) {
	var b Binding
	used := map[string]bool{}
	for _, in := range sig.Inputs {
		ib, err := bindInput(in, len(sig.Inputs), man, schema, opts)
		if err != nil {
			return Binding{}, err
		}
		for _, c := range ib.Columns {
			used[c] = true
		}
		b.Inputs = append(b.Inputs, ib)
	}
	if opts.Keep != nil {
		for _, k := range opts.Keep {
			if schema.FieldIndices(k) == nil {
				return Binding{}, fmt.Errorf("%w: --keep %s: no such column in %s (columns: %s)", ErrBadInput, k, opts.Source, columnList(schema))
			}
		}
		b.Keep = opts.Keep
	} else {
		b.Keep = []string{}
		for _, f := range schema.Fields() {
			if !used[f.Name] {
				b.Keep = append(b.Keep, f.Name)
			}
		}
	}
	for _, out := range sig.Outputs {
		if out.Elem == 0 || out.Elem == ElemString {
			b.Skipped = append(b.Skipped, out.Name)
			continue
		}
		if slices.Contains(b.Keep, out.Name) {
			return Binding{}, fmt.Errorf("%w: model output %s has the name of column %s of %s, which the output keeps: leave it out with --keep",
				ErrBadInput, out.Name, out.Name, opts.Source)
		}
		b.Outputs = append(b.Outputs, OutputBinding{Name: out.Name, Column: out.Name})
	}
	if len(b.Outputs) == 0 {
		return Binding{}, fmt.Errorf("%w: the model has no tensor output to write (outputs: %s)", ErrBadInput, strings.Join(b.Skipped, ", "))
	}
	return b, nil
}

func bindInput(in Tensor, inputs int, man *store.Manifest, schema *arrow.Schema, opts BindOptions) (InputBinding, error) {
	dtype, ok := numpyDType[in.Elem]
	if !ok {
		return InputBinding{}, fmt.Errorf("%w: model input %s: element type %s cannot be fed from Arrow columns", ErrBadInput, in, in.Elem)
	}
	ib := InputBinding{Name: in.Name, DType: dtype}
	if idx := schema.FieldIndices(in.Name); idx != nil {
		switch {
		case len(in.Dims) == 1 || in.Dims == nil:
			ib.Shape = ShapeVector
		case len(in.Dims) == 2 && in.Dims[1] <= 1:
			ib.Shape = ShapeColumn
		default:
			return InputBinding{}, fmt.Errorf("%w: model input %s takes more than one value per row; column %s of %s holds one",
				ErrBadInput, in, in.Name, opts.Source)
		}
		ib.Columns = []string{in.Name}
		return ib, checkType(in, schema.Field(idx[0]), opts.Source)
	}
	if inputs != 1 || len(in.Dims) != 2 {
		return InputBinding{}, fmt.Errorf("%w: model input %s is not a column of %s (columns: %s)", ErrBadInput, in, opts.Source, columnList(schema))
	}
	ib.Shape = ShapeMatrix
	ib.Columns = opts.Features
	from := "--columns"
	if len(ib.Columns) == 0 {
		ib.Columns, from = featureColumns(man), "the model's manifest"
	}
	if len(ib.Columns) == 0 {
		from = "the numeric columns of the input"
		for _, f := range schema.Fields() {
			if f.Name != opts.Label && !slices.Contains(opts.Keep, f.Name) && numericType(f.Type) {
				ib.Columns = append(ib.Columns, f.Name)
			}
		}
	}
	if want := in.Dims[1]; want >= 0 && int64(len(ib.Columns)) != want {
		return InputBinding{}, fmt.Errorf("%w: model input %s takes %d columns per row; %s gives %d (%s): name them with --columns",
			ErrBadInput, in, want, from, len(ib.Columns), strings.Join(ib.Columns, ","))
	}
	for _, c := range ib.Columns {
		idx := schema.FieldIndices(c)
		if idx == nil {
			return InputBinding{}, fmt.Errorf("%w: model input %s needs column %s (from %s), which %s lacks (columns: %s)",
				ErrBadInput, in, c, from, opts.Source, columnList(schema))
		}
		if err := checkType(in, schema.Field(idx[0]), opts.Source); err != nil {
			return InputBinding{}, err
		}
	}
	return ib, nil
}

// numpyDType is the numpy dtype of each element type a column can feed.
var numpyDType = map[ElemType]string{
	ElemFloat: "float32", ElemDouble: "float64", ElemFloat16: "float16",
	ElemInt8: "int8", ElemInt16: "int16", ElemInt32: "int32", ElemInt64: "int64",
	ElemUint8: "uint8", ElemUint16: "uint16", ElemUint32: "uint32", ElemUint64: "uint64",
	ElemBool: "bool", ElemString: "object",
}

// checkType refuses a column whose values the model input cannot take
// without changing what they mean: strings for numbers, fractions for
// integers, numbers for strings.
func checkType(in Tensor, f arrow.Field, source string) error {
	var ok bool
	switch in.Elem {
	case ElemFloat, ElemDouble, ElemFloat16:
		ok = numericType(f.Type)
	case ElemString:
		ok = f.Type.ID() == arrow.STRING || f.Type.ID() == arrow.LARGE_STRING
	case ElemBool:
		ok = f.Type.ID() == arrow.BOOL
	default:
		ok = integerType(f.Type) || f.Type.ID() == arrow.BOOL
	}
	if !ok {
		return fmt.Errorf("%w: model input %s takes %s; column %s of %s is %s", ErrBadInput, in, in.Elem, f.Name, source, f.Type)
	}
	return nil
}

func integerType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.INT8, arrow.INT16, arrow.INT32, arrow.INT64, arrow.UINT8, arrow.UINT16, arrow.UINT32, arrow.UINT64:
		return true
	}
	return false
}

func numericType(t arrow.DataType) bool {
	switch t.ID() {
	case arrow.FLOAT16, arrow.FLOAT32, arrow.FLOAT64, arrow.BOOL:
		return true
	}
	return integerType(t)
}

func columnList(schema *arrow.Schema) string {
	names := make([]string, 0, schema.NumFields())
	for _, f := range schema.Fields() {
		names = append(names, f.Name)
	}
	return strings.Join(names, ", ")
}
