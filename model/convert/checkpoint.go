package convert

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"path"
	"sort"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/model/onnx"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
	"github.com/spindle-ml/spindle/model/store"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
)

// Errors of bad input, which commands report with exit status 2.
var (
	// ErrNotCheckpoint says a path holds no checkpoint Spindle can export.
	ErrNotCheckpoint = errors.New("convert: not a checkpoint spindle can export")
	// ErrNoTable says a parameter-server checkpoint (or a model) has no such table.
	ErrNoTable = errors.New("convert: no such table")
	// ErrMismatch says a model and what it should fit (a feed, a
	// trainer, a column list) disagree on a shape or a name.
	ErrMismatch = errors.New("convert: mismatch")
)

// ExportOptions say how to export a checkpoint.
type ExportOptions struct {
	// Table picks the parameter-server table; "" takes the only one.
	Table string
	// TableOptions shape a table's graph.
	TableOptions
	// Columns and Label are the feed's feature columns and label, for the
	// manifest; empty when unknown.
	Columns []string
	Label   string
	// JobID is the job that wrote the checkpoint, for the manifest.
	JobID string
	// SpindleVersion is the producer's version.
	SpindleVersion string
}

// Exported is a checkpoint turned into an ONNX model and its manifest
// (without files; Publish or WriteDir fills them in).
type Exported struct {
	Model    *pb.ModelProto
	Manifest store.Manifest
	// What says what was exported, for the user.
	What string
}

// Checkpoint exports the checkpoint at from (a path or URI): a
// logistic-regression checkpoint (logreg.json, or the directory holding
// it) or parameter-server tables (a clock-N checkpoint, the directory a
// job checkpoints its tables into, or a job checkpoint directory with
// them under ps/).
func Checkpoint(ctx context.Context, res *fsys.Resolver, from string, o ExportOptions) (*Exported, error) {
	f, name, err := res.Resolve(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", from, err)
	}
	fi, err := f.Stat(ctx, name)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", from, err)
	}
	lrPath := name
	if fi.IsDir() {
		lrPath = path.Join(name, LogRegFile)
	}
	if lr, err := readLogReg(ctx, f, lrPath); err == nil {
		return exportLogReg(lr, from, o)
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("checkpoint %s: %w", from, err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("checkpoint %s: %w (want logreg.json or a directory)", from, ErrNotCheckpoint)
	}
	dir, m, err := findTables(ctx, res, strings.TrimRight(from, "/"))
	if err != nil {
		return nil, err
	}
	return exportTable(ctx, res, dir, m, o)
}

// readLogReg reads a logistic-regression checkpoint.
func readLogReg(ctx context.Context, f fsys.FS, name string) (LogReg, error) {
	r, err := f.Open(ctx, name)
	if err != nil {
		return LogReg{}, err
	}
	defer r.Close()
	var lr LogReg
	if err := json.NewDecoder(io.NewSectionReader(r, 0, r.Size())).Decode(&lr); err != nil {
		return LogReg{}, fmt.Errorf("%s: %w: %w", name, ErrNotCheckpoint, err)
	}
	if len(lr.Weights) == 0 {
		return LogReg{}, fmt.Errorf("%s: %w: no weights", name, ErrNotCheckpoint)
	}
	return lr, nil
}

func exportLogReg(lr LogReg, from string, o ExportOptions) (*Exported, error) {
	if len(o.Columns) > 0 && len(o.Columns) != len(lr.Weights) {
		return nil, marked(ErrMismatch, "checkpoint %s has %d weights but --columns names %d columns", from, len(lr.Weights), len(o.Columns))
	}
	m, err := LogRegToONNX(lr, o.SpindleVersion)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", from, err)
	}
	return &Exported{Model: m, Manifest: manifest(m, from, o, "float32"),
		What: fmt.Sprintf("logistic regression of %d features (%d epochs trained)", len(lr.Weights), lr.Epochs)}, nil
}

// findTables resolves from to one complete parameter-server checkpoint.
func findTables(ctx context.Context, res *fsys.Resolver, from string) (string, client.Manifest, error) {
	for _, dir := range []string{from, from + "/ps"} {
		if m, err := client.ReadManifest(ctx, res, dir); err == nil {
			return dir, m, nil
		}
		latest, m, ok, err := client.LatestCheckpoint(ctx, dir, res)
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return "", m, fmt.Errorf("checkpoint %s: %w", dir, err)
		}
		if ok {
			return latest, m, nil
		}
	}
	return "", client.Manifest{}, fmt.Errorf("checkpoint %s: %w: no %s, and no complete parameter-server checkpoint (clock-N/%s) in it or in its ps/",
		from, ErrNotCheckpoint, LogRegFile, client.ManifestName)
}

func exportTable(ctx context.Context, res *fsys.Resolver, dir string, cm client.Manifest, o ExportOptions) (*Exported, error) {
	tables := map[string]*Table{}
	_, err := server.CheckpointRows(ctx, res, dir, cm.Servers, o.Table, func(spec *pspb.TableSpec, keys []uint64, weights []float32) error {
		t := tables[spec.Name]
		if t == nil {
			t = &Table{Name: spec.Name, Dim: int(spec.Dim), Dense: spec.Rows > 0}
			tables[spec.Name] = t
		}
		t.Keys = append(t.Keys, keys...)
		t.Weights = append(t.Weights, weights...)
		return nil
	})
	if errors.Is(err, server.ErrNoTable) {
		return nil, marked(ErrNoTable, "checkpoint %s has no table %q", dir, o.Table)
	}
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	names := make([]string, 0, len(tables))
	for n := range tables {
		names = append(names, n)
	}
	sort.Strings(names)
	if len(names) == 0 {
		return nil, marked(ErrNoTable, "checkpoint %s holds no tables", dir)
	}
	if o.Table == "" && len(names) > 1 {
		return nil, marked(ErrNoTable, "checkpoint %s holds tables %s: pick one with --table", dir, strings.Join(names, ", "))
	}
	t := tables[names[0]]
	if t.Dense {
		sortDense(t)
	}
	m, err := TableToONNX(*t, o.TableOptions, o.SpindleVersion)
	if err != nil {
		return nil, fmt.Errorf("checkpoint %s: %w", dir, err)
	}
	kind := "sparse"
	if t.Dense {
		kind = "dense"
	}
	return &Exported{Model: m, Manifest: manifest(m, dir, o, "int64"),
		What: fmt.Sprintf("%s table %s: %d rows of dim %d", kind, t.Name, len(t.Keys), t.Dim)}, nil
}

// sortDense puts a dense table's rows in row order, as Gather indexes them.
func sortDense(t *Table) {
	idx := make([]int, len(t.Keys))
	for i := range idx {
		idx[i] = i
	}
	sort.Slice(idx, func(a, b int) bool { return t.Keys[idx[a]] < t.Keys[idx[b]] })
	keys := make([]uint64, len(t.Keys))
	w := make([]float32, len(t.Weights))
	for i, j := range idx {
		keys[i] = t.Keys[j]
		copy(w[i*t.Dim:(i+1)*t.Dim], t.Weights[j*t.Dim:(j+1)*t.Dim])
	}
	t.Keys, t.Weights = keys, w
}

// manifest describes an exported model; colType is the feed columns' type.
func manifest(m *pb.ModelProto, checkpoint string, o ExportOptions, colType string) store.Manifest {
	in, out := onnx.Signature(m)
	man := store.Manifest{JobID: o.JobID, Checkpoint: checkpoint, Format: store.FormatONNX, Inputs: in, Outputs: out,
		Frameworks: map[string]string{"spindle": o.SpindleVersion}}
	if len(o.Columns) > 0 || o.Label != "" {
		man.Feed = &store.Feed{Label: o.Label}
		for _, c := range o.Columns {
			man.Feed.Schema = append(man.Feed.Schema, store.Column{Name: c, Type: colType})
		}
	}
	return man
}

// markedError is a message that satisfies errors.Is for one of the
// package's sentinels without repeating the sentinel's text.
type markedError struct {
	msg  string
	kind error
}

func (e *markedError) Error() string { return e.msg }
func (e *markedError) Unwrap() error { return e.kind }

// marked formats a message marked as kind (ErrMismatch, ErrNoTable).
func marked(kind error, format string, args ...any) error {
	return &markedError{msg: fmt.Sprintf(format, args...), kind: kind}
}
