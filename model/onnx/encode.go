package onnx

import (
	"fmt"
	"sort"
	"strconv"

	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
	"github.com/spindle-ml/spindle/model/store"
	"google.golang.org/protobuf/proto"
)

// ExternalDataFile is the file beside model.onnx that holds the tensors
// Encode moves out of the protobuf.
const ExternalDataFile = "model.data"

// MaxProto is the largest protobuf ONNX readers accept: 2 GiB less one.
const MaxProto = 1<<31 - 1

// DefaultExternalThreshold is how many bytes of tensor data Encode keeps
// inside model.onnx before it moves the largest tensors out: 1 GiB, well
// under the protobuf limit.
const DefaultExternalThreshold = 1 << 30

// minExternal is the smallest tensor Encode moves out: shape inference
// reads small constant tensors (axes, shapes), which must stay inline.
const minExternal = 1024

// externalAlign aligns each tensor in the external-data file, so that a
// runtime may map it straight into memory.
const externalAlign = 4096

// Encode serialises m as the files of a model store version: model.onnx
// and, when its initializers hold more than threshold bytes, model.data
// with the largest of them (from 1 KiB; ONNX external data, laid out as the ONNX
// format specifies: location, offset and length relative to model.onnx).
// m is modified: the moved tensors lose their raw data.
func Encode(m *pb.ModelProto, threshold int64) ([]store.Source, error) {
	if threshold < 0 {
		return nil, fmt.Errorf("external-data threshold %d: want 0 or more bytes", threshold)
	}
	var inline int64
	var tensors []*pb.TensorProto
	for _, t := range m.GetGraph().GetInitializer() {
		inline += int64(len(t.RawData))
		if len(t.RawData) >= minExternal {
			tensors = append(tensors, t)
		}
	}
	// Largest first, name breaking ties, so that the layout is reproducible.
	sort.SliceStable(tensors, func(i, j int) bool {
		if len(tensors[i].RawData) != len(tensors[j].RawData) {
			return len(tensors[i].RawData) > len(tensors[j].RawData)
		}
		return tensors[i].Name < tensors[j].Name
	})
	var data []byte
	for _, t := range tensors {
		if inline <= threshold {
			break
		}
		off := (len(data) + externalAlign - 1) / externalAlign * externalAlign
		data = append(data, make([]byte, off-len(data))...)
		data = append(data, t.RawData...)
		inline -= int64(len(t.RawData))
		t.ExternalData = []*pb.StringStringEntryProto{
			{Key: "location", Value: ExternalDataFile},
			{Key: "offset", Value: strconv.Itoa(off)},
			{Key: "length", Value: strconv.Itoa(len(t.RawData))},
		}
		t.DataLocation = pb.TensorProto_EXTERNAL
		t.RawData = nil
	}
	if size := proto.Size(m); size > MaxProto {
		return nil, fmt.Errorf("model.onnx would be %d bytes, over the 2 GiB protobuf limit: lower the external-data threshold", size)
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(m)
	if err != nil {
		return nil, fmt.Errorf("encode the ONNX model: %w", err)
	}
	out := []store.Source{store.BytesSource(store.ModelFile, b)}
	if data != nil {
		out = append(out, store.BytesSource(ExternalDataFile, data))
	}
	return out, nil
}
