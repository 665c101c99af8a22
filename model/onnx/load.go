package onnx

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
	"google.golang.org/protobuf/proto"
)

// Load reads the ONNX model at name inside files, reading the external
// data of its initializers back into them from the files beside it.
func Load(ctx context.Context, files fsys.FS, name string) (*pb.ModelProto, error) {
	b, err := readAll(ctx, files, name, 0, -1)
	if err != nil {
		return nil, fmt.Errorf("read ONNX model %s: %w", name, err)
	}
	m := &pb.ModelProto{}
	if err := proto.Unmarshal(b, m); err != nil {
		return nil, fmt.Errorf("ONNX model %s: %w", name, err)
	}
	if m.GetGraph() == nil {
		return nil, fmt.Errorf("ONNX model %s: no graph (is it an ONNX file?)", name)
	}
	for _, t := range m.Graph.Initializer {
		if t.DataLocation != pb.TensorProto_EXTERNAL {
			continue
		}
		if err := readExternal(ctx, files, path.Dir(name), t); err != nil {
			return nil, fmt.Errorf("ONNX model %s: tensor %s: %w", name, t.Name, err)
		}
	}
	return m, nil
}

// readExternal fills t's raw data from the external-data file it names.
func readExternal(ctx context.Context, files fsys.FS, dir string, t *pb.TensorProto) error {
	var loc string
	off, length := int64(0), int64(-1)
	for _, e := range t.ExternalData {
		var err error
		switch e.Key {
		case "location":
			loc = e.Value
		case "offset":
			off, err = strconv.ParseInt(e.Value, 10, 64)
		case "length":
			length, err = strconv.ParseInt(e.Value, 10, 64)
		}
		if err != nil {
			return fmt.Errorf("external data %s %q: %w", e.Key, e.Value, err)
		}
	}
	clean := path.Clean(loc)
	if loc == "" || path.IsAbs(clean) || clean == ".." || strings.HasPrefix(clean, "../") {
		return fmt.Errorf("external data location %q: want a file beside the model", loc)
	}
	b, err := readAll(ctx, files, path.Join(dir, clean), off, length)
	if err != nil {
		return err
	}
	t.RawData = b
	t.ExternalData = nil
	t.DataLocation = pb.TensorProto_DEFAULT
	return nil
}

// readAll reads length bytes of name from off; length -1 reads to the end.
func readAll(ctx context.Context, files fsys.FS, name string, off, length int64) ([]byte, error) {
	f, err := files.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if length < 0 {
		length = f.Size() - off
	}
	if off < 0 || length < 0 || off+length > f.Size() {
		return nil, fmt.Errorf("%s: bytes %d+%d lie outside its %d bytes", name, off, length, f.Size())
	}
	b := make([]byte, length)
	if _, err := f.ReadAt(b, off); err != nil && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return b, nil
}
