package predict

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/model/predict/predicttest"
	"github.com/spindle-ml/spindle/model/store"
)

func writeLogReg(t *testing.T, dir string) string {
	t.Helper()
	p := filepath.Join(dir, "m.onnx")
	m := predicttest.LogReg{Input: "features", Output: "score", W: []float32{0.5, -0.25, 1}, B: 0.1}
	if err := m.Write(p); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadSignature(t *testing.T) {
	sig, err := ReadSignature(writeLogReg(t, t.TempDir()))
	if err != nil {
		t.Fatal(err)
	}
	// The weights W and B are initializers, not inputs.
	if len(sig.Inputs) != 1 || sig.Inputs[0].String() != "features float[?,3]" {
		t.Errorf("inputs %v, want features float[?,3]", sig.Inputs)
	}
	if len(sig.Outputs) != 1 || sig.Outputs[0].String() != "score float[?,1]" {
		t.Errorf("outputs %v, want score float[?,1]", sig.Outputs)
	}
	bad := filepath.Join(t.TempDir(), "bad.onnx")
	if err := os.WriteFile(bad, []byte("not a model at all"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadSignature(bad); !errors.Is(err, errMalformed) || !strings.Contains(err.Error(), "bad.onnx") {
		t.Errorf("a text file: %v, want a malformed-model error naming it", err)
	}
}

func TestLoadModel(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	dir := t.TempDir()
	file := writeLogReg(t, dir)
	data, _ := os.ReadFile(file)
	modelDir := filepath.Join(dir, "exported")
	os.Mkdir(modelDir, 0o755)
	os.WriteFile(filepath.Join(modelDir, ModelFile), data, 0o644)
	os.WriteFile(filepath.Join(modelDir, ManifestFile), []byte(`{"name":"churn","version":3,"feed":{"schema":[{"name":"a"},{"name":"b"},{"name":"y"},{"name":"c"}],"label":"y"}}`), 0o644)

	storeDir := filepath.Join(dir, "store")
	s, err := store.OpenURI(ctx, res, storeDir)
	if err != nil {
		t.Fatal(err)
	}
	man := store.Manifest{Format: store.FormatONNX,
		Inputs:  []store.Tensor{{Name: "features", Type: "float", Shape: []int64{-1, 3}}},
		Outputs: []store.Tensor{{Name: "score", Type: "float", Shape: []int64{-1, 1}}},
		Feed:    &store.Feed{Schema: []store.Column{{Name: "x1"}, {Name: "x2"}, {Name: "x3"}}}}
	for range 2 {
		if _, err := s.Publish(ctx, "churn", []store.Source{store.BytesSource(ModelFile, data)}, man); err != nil {
			t.Fatal(err)
		}
	}

	for _, tc := range []struct {
		ref, storeDir string
		features      string
	}{
		{ref: file},
		{ref: modelDir, features: "a,b,c"}, // the label left out
		{ref: "churn", storeDir: storeDir, features: "x1,x2,x3"},
		{ref: "churn/1", storeDir: storeDir, features: "x1,x2,x3"},
		{ref: storeDir + "/churn/2", features: "x1,x2,x3"},
	} {
		m, err := LoadModel(ctx, res, tc.ref, tc.storeDir, t.TempDir())
		if err != nil {
			t.Errorf("model %s: %v", tc.ref, err)
			continue
		}
		if len(m.Signature.Inputs) != 1 || m.Signature.Inputs[0].Name != "features" {
			t.Errorf("model %s: inputs %v", tc.ref, m.Signature.Inputs)
		}
		if got := strings.Join(featureColumns(m.Manifest), ","); got != tc.features {
			t.Errorf("model %s: manifest features %q, want %q", tc.ref, got, tc.features)
		}
	}
	for _, tc := range []struct{ ref, storeDir, want string }{
		{ref: filepath.Join(dir, "nope.onnx"), want: "nope.onnx"},
		{ref: dir, want: ModelFile},
		{ref: "churn/7", storeDir: storeDir, want: "version 7"},
		{ref: "attrition", storeDir: storeDir, want: "attrition"},
		{ref: "churn", want: "spindle.models.dir"},
	} {
		if _, err := LoadModel(ctx, res, tc.ref, tc.storeDir, t.TempDir()); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("model %s: %v, want a bad-input error naming %s", tc.ref, err, tc.want)
		}
	}
}

func TestBind(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{
		{Name: "id", Type: arrow.PrimitiveTypes.Int64},
		{Name: "name", Type: arrow.BinaryTypes.String},
		{Name: "f0", Type: arrow.PrimitiveTypes.Float64},
		{Name: "f1", Type: arrow.PrimitiveTypes.Float32},
		{Name: "f2", Type: arrow.PrimitiveTypes.Int32},
		{Name: "label", Type: arrow.PrimitiveTypes.Int64},
	}, nil)
	matrix := Signature{Inputs: []Tensor{{Name: "features", Elem: ElemFloat, Dims: []int64{-1, 3}}},
		Outputs: []Tensor{{Name: "score", Elem: ElemFloat, Dims: []int64{-1, 1}}, {Name: "probs"}}}
	perColumn := Signature{Inputs: []Tensor{{Name: "f0", Elem: ElemDouble, Dims: []int64{-1, 1}}, {Name: "id", Elem: ElemInt64, Dims: []int64{-1}}},
		Outputs: []Tensor{{Name: "score", Elem: ElemFloat, Dims: []int64{-1}}}}
	stringIn := Signature{Inputs: []Tensor{{Name: "name", Elem: ElemFloat, Dims: []int64{-1}}}, Outputs: matrix.Outputs}
	intIn := Signature{Inputs: []Tensor{{Name: "f0", Elem: ElemInt64, Dims: []int64{-1}}}, Outputs: matrix.Outputs}

	for _, tc := range []struct {
		name    string
		sig     Signature
		opts    BindOptions
		inputs  string // name:shape:columns;...
		keep    string
		wantErr []string
	}{
		{name: "features named", sig: matrix, opts: BindOptions{Features: []string{"f2", "f0", "f1"}},
			inputs: "features:matrix:f2,f0,f1", keep: "id,name,label"},
		{name: "numeric columns by default", sig: matrix, opts: BindOptions{Label: "label", Keep: []string{"id"}},
			inputs: "features:matrix:f0,f1,f2", keep: "id"},
		{name: "inputs named like columns", sig: perColumn, inputs: "f0:column:f0;id:vector:id", keep: "name,f1,f2,label"},
		{name: "too many default features", sig: matrix, opts: BindOptions{Label: "label"},
			wantErr: []string{"features float[?,3]", "4", "id,f0,f1,f2", "--columns"}},
		{name: "feature column missing", sig: matrix, opts: BindOptions{Features: []string{"f0", "f1", "f9"}, Source: "data/"},
			wantErr: []string{"features", "f9", "data/"}},
		{name: "model input not a column", sig: Signature{Inputs: []Tensor{{Name: "a", Elem: ElemFloat}, {Name: "b", Elem: ElemFloat}}, Outputs: matrix.Outputs},
			opts: BindOptions{Source: "in.parquet"}, wantErr: []string{"model input a", "in.parquet"}},
		{name: "string column for a float input", sig: stringIn, opts: BindOptions{Source: "in.parquet"}, wantErr: []string{"name", "float", "utf8", "in.parquet"}},
		{name: "fractions for an integer input", sig: intIn, opts: BindOptions{Source: "in.parquet"}, wantErr: []string{"f0", "int64", "float64"}},
		{name: "kept column missing", sig: matrix, opts: BindOptions{Features: []string{"f0", "f1", "f2"}, Keep: []string{"customer"}, Source: "in/"},
			wantErr: []string{"--keep customer", "in/"}},
		{name: "output named like a kept column", sig: Signature{Inputs: matrix.Inputs, Outputs: []Tensor{{Name: "label", Elem: ElemFloat}}},
			opts: BindOptions{Features: []string{"f0", "f1", "f2"}}, wantErr: []string{"model output label", "--keep"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b, err := Bind(tc.sig, nil, schema, tc.opts)
			if tc.wantErr != nil {
				if !errors.Is(err, ErrBadInput) {
					t.Fatalf("err %v, want ErrBadInput", err)
				}
				for _, w := range tc.wantErr {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not name %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var parts []string
			for _, in := range b.Inputs {
				parts = append(parts, in.Name+":"+in.Shape+":"+strings.Join(in.Columns, ","))
			}
			if got := strings.Join(parts, ";"); got != tc.inputs {
				t.Errorf("inputs %s, want %s", got, tc.inputs)
			}
			if got := strings.Join(b.Keep, ","); got != tc.keep {
				t.Errorf("keep %s, want %s", got, tc.keep)
			}
		})
	}
}

func TestBindSkipsNonTensorOutputs(t *testing.T) {
	schema := arrow.NewSchema([]arrow.Field{{Name: "x", Type: arrow.PrimitiveTypes.Float32}}, nil)
	sig := Signature{Inputs: []Tensor{{Name: "x", Elem: ElemFloat, Dims: []int64{-1}}},
		Outputs: []Tensor{{Name: "label", Elem: ElemInt64, Dims: []int64{-1}}, {Name: "probabilities"}}}
	b, err := Bind(sig, nil, schema, BindOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(b.Outputs) != 1 || b.Outputs[0].Name != "label" || len(b.Skipped) != 1 || b.Skipped[0] != "probabilities" {
		t.Errorf("outputs %+v skipped %v, want label written and probabilities skipped", b.Outputs, b.Skipped)
	}
}

func TestPrepareOutput(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	root := t.TempDir()

	fresh := filepath.Join(root, "a", "scores")
	if err := PrepareOutput(ctx, res, fresh, false); err != nil {
		t.Fatalf("a new directory: %v", err)
	}
	if entries, _ := os.ReadDir(fresh); len(entries) != 0 {
		t.Errorf("the write check left %v behind", entries)
	}
	os.WriteFile(filepath.Join(fresh, "old.parquet"), []byte("x"), 0o644)
	if err := PrepareOutput(ctx, res, fresh, false); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), "not empty") || !strings.Contains(err.Error(), fresh) {
		t.Errorf("a non-empty directory: %v, want refused naming it", err)
	}
	if err := PrepareOutput(ctx, res, fresh, true); err != nil {
		t.Fatalf("--overwrite: %v", err)
	}
	if entries, _ := os.ReadDir(fresh); len(entries) != 0 {
		t.Errorf("--overwrite kept %v", entries)
	}
	file := filepath.Join(root, "file")
	os.WriteFile(file, []byte("x"), 0o644)
	for _, bad := range []string{file, filepath.Join(file, "scores")} {
		if err := PrepareOutput(ctx, res, bad, false); !errors.Is(err, ErrBadInput) || !strings.Contains(err.Error(), bad) {
			t.Errorf("output %s: %v, want refused naming it", bad, err)
		}
	}
}

func writeRows(t *testing.T, path string, n int) {
	t.Helper()
	b := array.NewInt64Builder(memory.DefaultAllocator)
	defer b.Release()
	for i := range n {
		b.Append(int64(i))
	}
	col := b.NewArray()
	defer col.Release()
	schema := arrow.NewSchema([]arrow.Field{{Name: "id", Type: arrow.PrimitiveTypes.Int64}}, nil)
	rec := array.NewRecordBatch(schema, []arrow.Array{col}, int64(n))
	defer rec.Release()
	tbl := array.NewTableFromRecords(schema, []arrow.RecordBatch{rec})
	defer tbl.Release()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := pqarrow.WriteTable(tbl, f, int64(n), nil, pqarrow.DefaultWriterProps()); err != nil {
		t.Fatal(err)
	}
}

// FinishOutput writes _SUCCESS only when the files hold the input's rows,
// and clears what killed workers left under hidden names.
func TestFinishOutput(t *testing.T) {
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	dir := t.TempDir()
	writeRows(t, filepath.Join(dir, "a-1.parquet"), 30)
	writeRows(t, filepath.Join(dir, "b-2.parquet"), 12)
	os.WriteFile(filepath.Join(dir, ".b-2.parquet.tmp-99"), []byte("half"), 0o644)
	os.MkdirAll(filepath.Join(dir, ".spindle-resume", "ckpt-1"), 0o755)
	os.WriteFile(filepath.Join(dir, ".spindle-resume", "ckpt-1", "rank-0.json"), []byte("{}"), 0o644)

	if got, err := FinishOutput(ctx, res, dir, 50); err == nil || got != 42 || !strings.Contains(err.Error(), "42 rows, the input 50") {
		t.Errorf("8 rows missing: %d, %v; want an error saying so", got, err)
	}
	if _, err := os.Stat(filepath.Join(dir, SuccessFile)); err == nil {
		t.Error("_SUCCESS written for an incomplete output")
	}
	if got, err := FinishOutput(ctx, res, dir, 42); err != nil || got != 42 {
		t.Fatalf("complete output: %d, %v", got, err)
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if strings.Join(names, " ") != "_SUCCESS a-1.parquet b-2.parquet" {
		t.Errorf("output holds %v, want the parts and _SUCCESS only", names)
	}
}
