package predict

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"

	"github.com/spindle-ml/spindle/fsys"
)

// ErrBadInput is wrapped by every error about what the user gave spindle
// predict (the model, the input's columns, the output directory), found
// before anything ran.
var ErrBadInput = errors.New("predict: bad input")

// ModelFile and ManifestFile are the names of a model and its manifest
// inside a model's directory.
const (
	ModelFile    = "model.onnx"
	ManifestFile = "manifest.json"
)

// Manifest is the part of a model's manifest.json batch inference reads:
// which columns the model was trained on, so that a model taking one
// feature matrix is fed the same columns in the same order.
type Manifest struct {
	Name    string `json:"name"`
	Version int    `json:"version"`
	JobID   string `json:"job_id"`
	Feed    struct {
		Schema json.RawMessage `json:"schema"`
		Label  string          `json:"label"`
	} `json:"feed"`
}

// FeatureColumns are the columns of the manifest's feed schema other than
// its label, in order; nil when the manifest does not say. The schema may
// be a list of names or of objects with a name.
func (m *Manifest) FeatureColumns() []string {
	if m == nil || len(m.Feed.Schema) == 0 {
		return nil
	}
	var names []string
	if err := json.Unmarshal(m.Feed.Schema, &names); err != nil {
		names = nil
		var fields []struct {
			Name string `json:"name"`
		}
		if err := json.Unmarshal(m.Feed.Schema, &fields); err != nil {
			var wrapped struct {
				Fields []struct {
					Name string `json:"name"`
				} `json:"fields"`
			}
			if json.Unmarshal(m.Feed.Schema, &wrapped) != nil {
				return nil
			}
			fields = wrapped.Fields
		}
		for _, f := range fields {
			names = append(names, f.Name)
		}
	}
	out := names[:0]
	for _, n := range names {
		if n != m.Feed.Label {
			out = append(out, n)
		}
	}
	return out
}

// Model is a model resolved for batch inference, copied to local disk.
type Model struct {
	// Ref is what the user named.
	Ref string
	// Path is the local ONNX file.
	Path string
	// Manifest is the model's manifest; nil when it has none.
	Manifest *Manifest
	// Signature is what the ONNX graph takes and gives.
	Signature Signature
}

// LoadModel resolves ref, an ONNX file or a directory holding model.onnx
// (and optionally manifest.json), as a path or a file:// or hdfs:// URI.
// A model not on local disk is copied into dir. Every error about the
// model wraps ErrBadInput and names it.
func LoadModel(ctx context.Context, res *fsys.Resolver, ref, dir string) (*Model, error) {
	fsy, name, err := res.Resolve(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("%w: --model %s: %w", ErrBadInput, ref, err)
	}
	st, err := fsy.Stat(ctx, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: --model %s: no such file or directory (want an .onnx file or a directory holding %s)", ErrBadInput, ref, ModelFile)
		}
		return nil, fmt.Errorf("%w: --model %s: %w", ErrBadInput, ref, err)
	}
	m := &Model{Ref: ref}
	onnxName := name
	if st.IsDir() {
		onnxName = path.Join(name, ModelFile)
		data, err := readAll(ctx, fsy, path.Join(name, ManifestFile))
		switch {
		case err == nil:
			m.Manifest = &Manifest{}
			if err := json.Unmarshal(data, m.Manifest); err != nil {
				return nil, fmt.Errorf("%w: --model %s: %s: %w", ErrBadInput, ref, ManifestFile, err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: --model %s: read %s: %w", ErrBadInput, ref, ManifestFile, err)
		}
	}
	data, err := readAll(ctx, fsy, onnxName)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("%w: --model %s: no %s in that directory", ErrBadInput, ref, ModelFile)
		}
		return nil, fmt.Errorf("%w: --model %s: read %s: %w", ErrBadInput, ref, onnxName, err)
	}
	if m.Signature, err = parseModel(data); err != nil {
		return nil, fmt.Errorf("%w: --model %s: %w", ErrBadInput, ref, err)
	}
	m.Path = filepath.Join(dir, ModelFile)
	if err := os.WriteFile(m.Path, data, 0o600); err != nil {
		return nil, fmt.Errorf("copy the model to %s: %w", m.Path, err)
	}
	return m, nil
}

func readAll(ctx context.Context, fsy fsys.FS, name string) ([]byte, error) {
	f, err := fsy.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
