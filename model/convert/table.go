package convert

import (
	"fmt"
	"slices"

	"github.com/spindle-ml/spindle/model/onnx"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
)

// Table is one parameter-server table: its rows' keys and weights
// (Dim floats per row, in the keys' order).
type Table struct {
	Name string
	Dim  int
	// Dense tables have rows 0..n-1 and are looked up by row; sparse ones
	// by key.
	Dense   bool
	Keys    []uint64
	Weights []float32
}

// Combiners of a row's embeddings.
const (
	CombineSum  = "sum"
	CombineMean = "mean"
)

// TableOptions shape a table's ONNX graph.
type TableOptions struct {
	// Combiner reduces the embeddings of a row's ids: sum (default) or mean.
	Combiner string
	// Sigmoid applies the logistic function to the combined embedding,
	// making a sparse logistic regression's probability.
	Sigmoid bool
}

// Names inside a table's ONNX model; the table's own initializer is
// called "table.<name>".
const (
	TableInput        = "ids"
	TableOutput       = "embedding"
	TableOutputLogReg = "probability"
	tablePrefix       = "table."
	rowsKeysAttr      = "keys_int64s"
	rowsValuesAttr    = "values_int64s"
)

// TableToONNX returns the model looking up t: ids int64[N,K] in (each row
// K keys, or row numbers of a dense table), the combined embedding
// float[N,Dim] out (probability, with Sigmoid). A sparse key the table
// does not hold contributes zeros, as an untouched row of the parameter
// server would.
func TableToONNX(t Table, o TableOptions, producerVersion string) (*pb.ModelProto, error) {
	if t.Dim < 1 || len(t.Weights) != len(t.Keys)*t.Dim {
		return nil, fmt.Errorf("table %s: %d weights for %d keys of dim %d", t.Name, len(t.Weights), len(t.Keys), t.Dim)
	}
	rows := int64(len(t.Keys))
	weights := t.Weights
	var nodes []*pb.NodeProto
	index := TableInput
	if !t.Dense {
		keys := make([]int64, len(t.Keys))
		values := make([]int64, len(t.Keys))
		for i, k := range t.Keys {
			keys[i], values[i] = int64(k), int64(i)
		}
		enc := onnx.Node("LabelEncoder", "rows", []string{TableInput}, []string{"rows"},
			onnx.AttrInts(rowsKeysAttr, keys), onnx.AttrInts(rowsValuesAttr, values), onnx.AttrInt("default_int64", rows))
		enc.Domain = onnx.DomainML
		nodes = append(nodes, enc)
		index = "rows"
		// The row unknown keys map to: zeros.
		weights = append(slices.Clip(weights), make([]float32, t.Dim)...)
		rows++
	}
	init := tablePrefix + t.Name
	nodes = append(nodes, onnx.Node("Gather", "gather", []string{init, index}, []string{"embeddings"}, onnx.AttrInt("axis", 0)))
	out := TableOutput
	if o.Sigmoid {
		out = "combined"
	}
	inits := []*pb.TensorProto{onnx.FloatTensor(init, []int64{rows, int64(t.Dim)}, weights)}
	switch o.Combiner {
	case CombineSum, "":
		inits = append(inits, onnx.Int64Tensor("reduce_axes", []int64{1}, []int64{1}))
		nodes = append(nodes, onnx.Node("ReduceSum", "combine", []string{"embeddings", "reduce_axes"}, []string{out}, onnx.AttrInt("keepdims", 0)))
	case CombineMean:
		nodes = append(nodes, onnx.Node("ReduceMean", "combine", []string{"embeddings"}, []string{out},
			onnx.AttrInts("axes", []int64{1}), onnx.AttrInt("keepdims", 0)))
	default:
		return nil, fmt.Errorf("combiner %q: want %s or %s", o.Combiner, CombineSum, CombineMean)
	}
	if o.Sigmoid {
		nodes = append(nodes, onnx.Node("Sigmoid", "sigmoid", []string{out}, []string{TableOutputLogReg}))
		out = TableOutputLogReg
	}
	g := &pb.GraphProto{
		Name:        "table_" + t.Name,
		Node:        nodes,
		Initializer: inits,
		Input:       []*pb.ValueInfoProto{onnx.Value(TableInput, onnx.Int64, -1, -1)},
		Output:      []*pb.ValueInfoProto{onnx.Value(out, onnx.Float, -1, int64(t.Dim))},
	}
	return onnx.NewModel(g, producerVersion), nil
}

// TableFromONNX reads table name back from a model TableToONNX wrote:
// its keys and weights, without the zero row of unknown keys.
func TableFromONNX(m *pb.ModelProto, where, name string) (Table, error) {
	init, ok := onnx.Initializer(m, tablePrefix+name)
	if !ok {
		return Table{}, marked(ErrNoTable, "%s: no table %q (no initializer %q; it holds %v)", where, name, tablePrefix+name, TableNames(m))
	}
	if len(init.Dims) != 2 {
		return Table{}, fmt.Errorf("%s: table %s has shape %v, want [rows, dim]", where, name, init.Dims)
	}
	vals, err := onnx.Float64s(init)
	if err != nil {
		return Table{}, fmt.Errorf("%s: %w", where, err)
	}
	t := Table{Name: name, Dim: int(init.Dims[1]), Dense: true}
	rows := int(init.Dims[0])
	for _, n := range m.GetGraph().GetNode() {
		if n.OpType != "LabelEncoder" {
			continue
		}
		t.Dense = false
		var keys, values []int64
		for _, a := range n.Attribute {
			switch a.Name {
			case rowsKeysAttr:
				keys = a.Ints
			case rowsValuesAttr:
				values = a.Ints
			}
		}
		if len(keys) != len(values) || len(keys) != rows-1 {
			return Table{}, fmt.Errorf("%s: table %s: %d keys, %d row numbers for %d rows", where, name, len(keys), len(values), rows)
		}
		t.Keys = make([]uint64, len(keys))
		t.Weights = make([]float32, len(keys)*t.Dim)
		for i, k := range keys {
			r := int(values[i])
			if r < 0 || r >= rows-1 {
				return Table{}, fmt.Errorf("%s: table %s: key %d maps to row %d of %d", where, name, k, r, rows)
			}
			t.Keys[i] = uint64(k)
			for j := range t.Dim {
				t.Weights[i*t.Dim+j] = float32(vals[r*t.Dim+j])
			}
		}
		return t, nil
	}
	t.Keys = make([]uint64, rows)
	for i := range t.Keys {
		t.Keys[i] = uint64(i)
	}
	t.Weights = make([]float32, len(vals))
	for i, v := range vals {
		t.Weights[i] = float32(v)
	}
	return t, nil
}

// TableNames lists the tables a model holds.
func TableNames(m *pb.ModelProto) []string {
	var out []string
	for _, t := range m.GetGraph().GetInitializer() {
		if len(t.Name) > len(tablePrefix) && t.Name[:len(tablePrefix)] == tablePrefix {
			out = append(out, t.Name[len(tablePrefix):])
		}
	}
	return out
}
