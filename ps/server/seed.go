package server

import (
	"context"
	"fmt"
	"path"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// SeedCheckpoint writes, into dir, the server parts of a checkpoint at
// clock 0 holding one table with the given rows (dim weights per key, in
// the keys' order), placed as a job of servers servers with replicas
// backups per row places them. A job restores it (the client's Restore)
// to start from weights made elsewhere, such as an ONNX model's. The
// optimizer's slots start at their starting values, except FTRL's z, set
// so that the weight FTRL derives from it is the one given. It returns
// the parts' URIs; the caller writes the manifest that completes the
// checkpoint.
func SeedCheckpoint(ctx context.Context, files *fsys.Resolver, dir string, servers, replicas int, spec *pspb.TableSpec, keys []uint64, weights []float32) ([]string, error) {
	spec = proto.Clone(spec).(*pspb.TableSpec)
	if err := ps.Normalize(spec); err != nil {
		return nil, err
	}
	dim := int(spec.Dim)
	if len(weights) != len(keys)*dim {
		return nil, fmt.Errorf("seed table %s: %d weights for %d keys of dim %d", spec.Name, len(weights), len(keys), dim)
	}
	addrs := make([]string, servers)
	for i := range addrs {
		addrs[i] = fmt.Sprint(i) // placement depends on the index alone
	}
	ring, err := ps.NewRing(1, addrs, 0)
	if err != nil {
		return nil, err
	}
	parts := make([]*table, servers)
	for i := range parts {
		parts[i] = newTable(spec)
	}
	var holders []int
	for i, k := range keys {
		if spec.Rows > 0 && k >= spec.Rows {
			return nil, fmt.Errorf("seed table %s: row %d of a dense table of %d rows", spec.Name, k, spec.Rows)
		}
		holders = ring.Holders(holders[:0], k, spec.Rows, replicas)
		for _, h := range holders {
			t := parts[h]
			sh := &t.shards[shardOf(k)]
			row := t.rowAt(sh, t.create(sh, k))
			copy(row[:dim], weights[i*dim:(i+1)*dim])
			seedSlots(spec.Optimizer, row[:dim], row[dim:])
		}
	}
	res, name, err := files.Resolve(ctx, dir)
	if err != nil {
		return nil, fmt.Errorf("seed checkpoint %s: %w", dir, err)
	}
	if err := fsys.MkdirPrivate(ctx, res, name); err != nil {
		return nil, fmt.Errorf("seed checkpoint %s: %w", dir, err)
	}
	uris := make([]string, servers)
	for i, t := range parts {
		uris[i] = joinURI(dir, FileName(i, servers))
		if _, _, err := writePart(ctx, res, path.Join(name, FileName(i, servers)), 0, i, servers, 1, []*table{t}); err != nil {
			return nil, fmt.Errorf("seed checkpoint %s: %w", uris[i], err)
		}
	}
	return uris, nil
}

// seedSlots sets FTRL's z for weights w with n = 0: FTRL's weight is
// -(z - sign(z)·l1) / (β/α + l2), so z = -w·(β/α + l2) - sign(w)·l1.
// Other optimizers keep the starting slots newTable gave.
func seedSlots(o *pspb.Optimizer, w, slots []float32) {
	if o.Kind != ps.FTRL {
		return
	}
	k := float64(o.FtrlBeta)/float64(o.LearningRate) + float64(o.L2)
	z := slots[:len(w)]
	for i, wi := range w {
		switch {
		case wi > 0:
			z[i] = float32(-float64(wi)*k - float64(o.L1))
		case wi < 0:
			z[i] = float32(-float64(wi)*k + float64(o.L1))
		default:
			z[i] = 0
		}
	}
}
