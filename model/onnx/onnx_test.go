package onnx

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

func testModel() *pb.ModelProto {
	big := make([]float32, 1000)
	for i := range big {
		big[i] = float32(i)
	}
	g := &pb.GraphProto{
		Initializer: []*pb.TensorProto{FloatTensor("big", []int64{1000}, big), Int64Tensor("axes", []int64{1}, []int64{1})},
		Input:       []*pb.ValueInfoProto{Value("x", Float, -1, 3), Value("big", Float, 1000)},
		Output:      []*pb.ValueInfoProto{Value("y", Double, -1)},
	}
	return NewModel(g, "test")
}

// writeSources writes Encode's files into a fresh directory.
func writeSources(t *testing.T, m *pb.ModelProto, threshold int64) string {
	t.Helper()
	srcs, err := Encode(m, threshold)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for _, s := range srcs {
		r, _ := s.Open(context.Background())
		f, err := os.Create(filepath.Join(dir, s.Path))
		if err != nil {
			t.Fatal(err)
		}
		f.ReadFrom(r)
		f.Close()
	}
	return dir
}

// Small tensors stay inline (shape inference reads them); large ones move
// out and come back byte for byte.
func TestExternalDataRoundTrip(t *testing.T) {
	want := testModel()
	dir := writeSources(t, proto.Clone(want).(*pb.ModelProto), 0)
	got, err := Load(context.Background(), fsys.Local(), filepath.ToSlash(filepath.Join(dir, "model.onnx")))
	if err != nil {
		t.Fatal(err)
	}
	if !proto.Equal(got, want) {
		t.Fatal("the model loaded back differs from the one encoded")
	}
	raw, _ := os.ReadFile(filepath.Join(dir, "model.onnx"))
	m := &pb.ModelProto{}
	proto.Unmarshal(raw, m)
	if m.Graph.Initializer[0].DataLocation != pb.TensorProto_EXTERNAL || m.Graph.Initializer[1].DataLocation != pb.TensorProto_DEFAULT {
		t.Fatalf("locations: big %v, axes %v", m.Graph.Initializer[0].DataLocation, m.Graph.Initializer[1].DataLocation)
	}
	if _, err := Encode(testModel(), -1); err == nil {
		t.Fatal("a negative threshold was taken")
	}
}

// A model whose external data points outside its directory is refused.
func TestLoadRefusesExternalDataOutsideTheModel(t *testing.T) {
	m := testModel()
	m.Graph.Initializer[0].RawData = nil
	m.Graph.Initializer[0].DataLocation = pb.TensorProto_EXTERNAL
	m.Graph.Initializer[0].ExternalData = []*pb.StringStringEntryProto{{Key: "location", Value: "../../etc/passwd"}}
	b, _ := proto.Marshal(m)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "model.onnx"), b, 0o644)
	_, err := Load(context.Background(), fsys.Local(), filepath.ToSlash(filepath.Join(dir, "model.onnx")))
	if err == nil || !strings.Contains(err.Error(), `location "../../etc/passwd"`) || !strings.Contains(err.Error(), "tensor big") {
		t.Fatalf("Load = %v", err)
	}
}

func TestSignature(t *testing.T) {
	in, out := Signature(testModel())
	if len(in) != 1 || in[0].Name != "x" || in[0].Type != "float" || in[0].Shape[0] != -1 || in[0].Shape[1] != 3 {
		t.Fatalf("inputs %+v (an initializer listed as an input is not one)", in)
	}
	if len(out) != 1 || out[0].Type != "double" {
		t.Fatalf("outputs %+v", out)
	}
}
