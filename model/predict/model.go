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
	"github.com/spindle-ml/spindle/model/store"
)

// ErrBadInput is wrapped by every error about what the user gave spindle
// predict (the model, the input's columns, the output directory), found
// before anything ran.
var ErrBadInput = errors.New("predict: bad input")

// ModelFile and ManifestFile are the names of a model and its manifest
// inside a model's directory, as in the model store.
const (
	ModelFile    = store.ModelFile
	ManifestFile = store.ManifestFile
)

// featureColumns are the columns of the manifest's feed schema other than
// its label, in order; nil when the manifest does not say.
func featureColumns(m *store.Manifest) []string {
	if m == nil || m.Feed == nil {
		return nil
	}
	var out []string
	for _, c := range m.Feed.Schema {
		if c.Name != m.Feed.Label {
			out = append(out, c.Name)
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
	Manifest *store.Manifest
	// Signature is what the ONNX graph takes and gives.
	Signature Signature
}

// LoadModel resolves ref: an ONNX file or a directory holding model.onnx
// (and optionally manifest.json), as a path or a file:// or hdfs:// URI;
// or else a model in a store, [STORE/]NAME[/VERSION] (storeDir, from
// spindle.models.dir, when it names no store; the latest version when it
// names none). The model is copied into dir. Every error about the model
// wraps ErrBadInput and names it.
func LoadModel(ctx context.Context, res *fsys.Resolver, ref, storeDir, dir string) (*Model, error) {
	fsy, name, err := res.Resolve(ctx, ref)
	if err != nil {
		return nil, fmt.Errorf("%w: --model %s: %w", ErrBadInput, ref, err)
	}
	st, err := fsy.Stat(ctx, name)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return loadStoreModel(ctx, res, ref, storeDir, dir)
	case err != nil:
		return nil, fmt.Errorf("%w: --model %s: %w", ErrBadInput, ref, err)
	}
	m := &Model{Ref: ref}
	onnxName := name
	if st.IsDir() {
		onnxName = path.Join(name, ModelFile)
		data, err := readAll(ctx, fsy, path.Join(name, ManifestFile))
		switch {
		case err == nil:
			m.Manifest = &store.Manifest{}
			if err := json.Unmarshal(data, m.Manifest); err != nil {
				return nil, fmt.Errorf("%w: --model %s: %s: %w", ErrBadInput, ref, ManifestFile, err)
			}
		case !errors.Is(err, fs.ErrNotExist):
			return nil, fmt.Errorf("%w: --model %s: read %s: %w", ErrBadInput, ref, ManifestFile, err)
		}
	}
	return m, m.copyONNX(ctx, fsy, onnxName, dir)
}

// loadStoreModel resolves ref in a model store.
func loadStoreModel(ctx context.Context, res *fsys.Resolver, ref, storeDir, dir string) (*Model, error) {
	s, in, err := store.OpenRef(ctx, res, storeDir, ref)
	if err != nil {
		return nil, fmt.Errorf("%w: --model %s: no such file or directory, nor a model in a store (%v)", ErrBadInput, ref, err)
	}
	v, err := s.Resolve(ctx, in)
	if err != nil {
		return nil, fmt.Errorf("%w: --model %s: %w", ErrBadInput, ref, err)
	}
	m := &Model{Ref: ref, Manifest: &v.Manifest}
	return m, m.copyONNX(ctx, s.FS(), v.ModelPath, dir)
}

// copyONNX reads the model's signature from name in fsy and copies the
// file into dir.
func (m *Model) copyONNX(ctx context.Context, fsy fsys.FS, name, dir string) error {
	data, err := readAll(ctx, fsy, name)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("%w: --model %s: no %s there", ErrBadInput, m.Ref, ModelFile)
		}
		return fmt.Errorf("%w: --model %s: read %s: %w", ErrBadInput, m.Ref, name, err)
	}
	if m.Signature, err = parseModel(data); err != nil {
		return fmt.Errorf("%w: --model %s: %w", ErrBadInput, m.Ref, err)
	}
	m.Path = filepath.Join(dir, ModelFile)
	if err := os.WriteFile(m.Path, data, 0o600); err != nil {
		return fmt.Errorf("copy the model to %s: %w", m.Path, err)
	}
	return nil
}

func readAll(ctx context.Context, fsy fsys.FS, name string) ([]byte, error) {
	f, err := fsy.Open(ctx, name)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(f)
}
