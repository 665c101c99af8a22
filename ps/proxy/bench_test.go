package proxy

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

const (
	benchKeys = 4096
	benchDim  = 16
)

// BenchmarkPullPush is one step of a worker — a pull and a push of 4096
// keys of dim 16 on 2 servers — made directly with the Go client, through
// the proxy from Go (the cost of the extra hop), and through the proxy
// from Python with spindle.ps (the cost a Python trainer sees).
func BenchmarkPullPush(b *testing.B) {
	c := startCluster(b, 2, 1, 0)
	keys := keysN(benchKeys)
	grads := make([]float32, benchKeys*benchDim)
	for i := range grads {
		grads[i] = 1e-3
	}
	spec := fmt.Sprintf(`{"name": "emb", "dim": %d, "optimizer": {"kind": "sgd"}}`, benchDim)

	b.Run("direct", func(b *testing.B) {
		cl := c.goClient(b, 0)
		ctx := context.Background()
		if err := cl.Declare(ctx, &ps.TableSpec{Name: "emb", Dim: benchDim, Optimizer: &pspb.Optimizer{Kind: ps.SGD}}); err != nil {
			b.Fatal(err)
		}
		rows := make([]float32, benchKeys*benchDim)
		b.SetBytes(int64(len(rows)+len(grads))*4 + 2*benchKeys*8)
		for b.Loop() {
			if err := cl.Pull(ctx, "emb", keys, rows); err != nil {
				b.Fatal(err)
			}
			if err := cl.Push(ctx, "emb", keys, grads); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("proxy", func(b *testing.B) {
		p := startProxy(b, c, 0, token)
		cl := dial(b, p)
		cl.ok(opDeclare, []byte(spec))
		b.SetBytes(int64(2*len(grads))*4 + 2*benchKeys*8)
		for b.Loop() {
			cl.ok(opPull, name("emb"), ps.KeyBytes(keys))
			cl.ok(opPush, name("emb"), u32(benchKeys), ps.KeyBytes(keys), ps.FloatBytes(grads))
		}
	})
	b.Run("python", func(b *testing.B) {
		if err := exec.Command(pyInterpreter, "-c", "import numpy").Run(); err != nil {
			b.Skipf("%s cannot import numpy: %v", pyInterpreter, err)
		}
		p := startProxy(b, c, 0, token)
		script := fmt.Sprintf(`
import sys, time
import numpy as np
from spindle import ps
c = ps.Client(sys.argv[1])
c.declare("emb", %d, optimizer="sgd")
keys = np.arange(%d, dtype=np.uint64) * 7919 + 3
grads = np.full((len(keys), %d), 1e-3, dtype=np.float32)
n = int(sys.argv[2])
c.push("emb", keys, grads)
t = time.perf_counter()
for _ in range(n):
    rows = c.pull("emb", keys)
    c.push("emb", keys, grads)
print(int((time.perf_counter() - t) / n * 1e9))
`, benchDim, benchKeys, benchDim)
		// The script times its own loop: b.N steps, without its start-up.
		n := max(b.N, 1)
		cmd := exec.Command(pyInterpreter, "-c", script, p.Path(), strconv.Itoa(n))
		cmd.Env = append(os.Environ(), "PYTHONPATH="+filepath.Join(testbin.Root(), "python"))
		out, err := cmd.CombinedOutput()
		if err != nil {
			b.Fatalf("%v\n%s", err, out)
		}
		ns, err := strconv.ParseFloat(strings.TrimSpace(string(out)), 64)
		if err != nil {
			b.Fatalf("python printed %q", out)
		}
		b.ReportMetric(ns, "py-ns/step")
		b.ReportMetric(float64(2*benchKeys)/(ns/float64(time.Second)), "py-keys/s")
	})
}
