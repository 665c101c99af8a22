package convert

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/model/onnx"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
	"github.com/spindle-ml/spindle/model/store"
)

// OpenModel loads the ONNX model ref names: a .onnx file, a directory
// holding model.onnx, or a store reference [STORE/]NAME[/VERSION] (the
// store defaultStore when it names none). It returns the model and where
// it came from, for messages.
func OpenModel(ctx context.Context, res *fsys.Resolver, defaultStore, ref string) (*pb.ModelProto, string, error) {
	if strings.HasSuffix(ref, ".onnx") {
		f, name, err := res.Resolve(ctx, ref)
		if err != nil {
			return nil, ref, fmt.Errorf("model %s: %w", ref, err)
		}
		m, err := onnx.Load(ctx, f, name)
		return m, ref, err
	}
	if strings.Contains(ref, "://") || strings.HasPrefix(ref, "/") || strings.HasPrefix(ref, ".") {
		f, name, err := res.Resolve(ctx, ref)
		if err != nil {
			return nil, ref, fmt.Errorf("model %s: %w", ref, err)
		}
		if fi, err := f.Stat(ctx, path.Join(name, store.ModelFile)); err == nil && !fi.IsDir() {
			m, err := onnx.Load(ctx, f, path.Join(name, store.ModelFile))
			return m, ref, err
		} else if !errors.Is(err, fs.ErrNotExist) {
			return nil, ref, fmt.Errorf("model %s: %w", ref, err)
		}
	}
	s, in, err := store.OpenRef(ctx, res, defaultStore, ref)
	if err != nil {
		return nil, ref, err
	}
	v, err := s.Resolve(ctx, in)
	if err != nil {
		return nil, ref, err
	}
	m, err := onnx.Load(ctx, s.FS(), v.ModelPath)
	return m, v.URI, err
}
