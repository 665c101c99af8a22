package export

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"path"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
)

// ErrNoCheckpoint is returned when a directory holds no complete
// checkpoint.
var ErrNoCheckpoint = errors.New("export: no complete checkpoint")

// ErrNoTable is returned for a table the checkpoint does not hold.
var ErrNoTable = server.ErrNoTable

// File is one table written.
type File struct {
	Table string
	URI   string
	Rows  int64
	Dim   int
}

// Checkpoint writes the tables of a checkpoint to outDir/<table>.parquet
// (outDir a local path or hdfs://). from is either one checkpoint
// (base/clock-N, with its manifest) or the base a job checkpoints into,
// whose latest complete checkpoint is taken. table names one table; ""
// writes them all. Each file appears whole or not at all; when one fails,
// none of them is published. It returns the checkpoint's clock and the
// files written.
func Checkpoint(ctx context.Context, res *fsys.Resolver, from, table, outDir string) (int64, []File, error) {
	dir, m, err := find(ctx, res, from)
	if err != nil {
		return 0, nil, err
	}
	ofs, oname, err := res.Resolve(ctx, outDir)
	if err != nil {
		return 0, nil, fmt.Errorf("export to %s: %w", outDir, err)
	}
	if err := ofs.MkdirAll(ctx, oname); err != nil {
		return 0, nil, fmt.Errorf("export to %s: %w", outDir, err)
	}
	writers := map[string]*client.ParquetWriter{}
	var order []File
	defer func() {
		for _, w := range writers {
			w.Abort() // after Commit, nothing
		}
	}()
	clock, err := server.CheckpointRows(ctx, res, dir, m.Servers, table, func(spec *pspb.TableSpec, keys []uint64, weights []float32) error {
		w := writers[spec.Name]
		if w == nil {
			uri := strings.TrimRight(outDir, "/") + "/" + spec.Name + ".parquet"
			var err error
			if w, err = client.NewParquetWriter(ctx, res, uri, int(spec.Dim)); err != nil {
				return err
			}
			writers[spec.Name] = w
			order = append(order, File{Table: spec.Name, URI: uri, Dim: int(spec.Dim)})
		}
		return w.Write(keys, weights)
	})
	if err != nil {
		return 0, nil, fmt.Errorf("export %s: %w", dir, err)
	}
	for i := range order {
		n, err := writers[order[i].Table].Commit()
		if err != nil {
			return 0, nil, fmt.Errorf("export %s: %w", dir, err)
		}
		order[i].Rows = n
	}
	return clock, order, nil
}

// find resolves from to one complete checkpoint and its manifest.
func find(ctx context.Context, res *fsys.Resolver, from string) (string, client.Manifest, error) {
	if m, err := client.ReadManifest(ctx, res, from); err == nil {
		return strings.TrimRight(from, "/"), m, nil
	} else if !errors.Is(err, fs.ErrNotExist) {
		return "", m, err
	}
	dir, m, ok, err := client.LatestCheckpoint(ctx, from, res)
	if err != nil {
		return "", m, err
	}
	if !ok {
		return "", m, fmt.Errorf("%w in %s (a checkpoint is a clock-N directory with a %s)", ErrNoCheckpoint, from, path.Base(client.ManifestName))
	}
	return dir, m, nil
}
