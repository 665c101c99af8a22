package convert

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps/client"
	"github.com/spindle-ml/spindle/ps/pspb"
	"github.com/spindle-ml/spindle/ps/server"
)

// SeedPS writes table t (read from an ONNX model with TableFromONNX) as a
// complete parameter-server checkpoint at clock 0 under base
// (base/clock-0), placed for a job of servers servers with replicas
// backups per row, so that the job's workers start from it with the
// client's Restore. spec is the table as the job declares it; a
// dimension or kind (sparse, dense) that differs from the model's is
// refused naming both. It returns the checkpoint's directory.
func SeedPS(ctx context.Context, res *fsys.Resolver, base, where string, servers, replicas int, spec *pspb.TableSpec, t Table) (string, error) {
	if int(spec.Dim) != t.Dim {
		return "", marked(ErrMismatch, "%s: table %s has dim %d but the job declares dim %d", where, t.Name, t.Dim, spec.Dim)
	}
	if (spec.Rows > 0) != t.Dense {
		return "", marked(ErrMismatch, "%s: table %s is %s but the job declares it %s", where, t.Name, kindOf(t.Dense), kindOf(spec.Rows > 0))
	}
	dir := strings.TrimRight(base, "/") + "/clock-0"
	parts, err := server.SeedCheckpoint(ctx, res, dir, servers, replicas, spec, t.Keys, t.Weights)
	if err != nil {
		return "", err
	}
	m := client.Manifest{Clock: 0, Servers: servers, Files: parts, Keys: uint64(len(t.Keys))}
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return "", err
	}
	f, name, err := res.Resolve(ctx, dir+"/"+client.ManifestName)
	if err != nil {
		return "", err
	}
	w, err := f.CreateAtomic(ctx, name)
	if err != nil {
		return "", fmt.Errorf("seed checkpoint %s: %w", dir, err)
	}
	if _, err := w.Write(b); err != nil {
		w.Abort()
		return "", fmt.Errorf("seed checkpoint %s: %w", dir, err)
	}
	if err := w.Commit(); err != nil {
		return "", fmt.Errorf("seed checkpoint %s: %w", dir, err)
	}
	return dir, nil
}

func kindOf(dense bool) string {
	if dense {
		return "dense"
	}
	return "sparse"
}
