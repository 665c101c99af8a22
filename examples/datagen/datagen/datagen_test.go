package datagen_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/apache/arrow-go/v18/arrow/array"

	"github.com/spindle-ml/spindle/examples/datagen/datagen"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/fsys"

	"github.com/spindle-ml/spindle/feed/plan"
)

func generate(t *testing.T, cfg datagen.Config) (datagen.Model, string) {
	t.Helper()
	if cfg.Out == "" {
		cfg.Out = t.TempDir()
	}
	m, err := datagen.Generate(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m, cfg.Out
}

// readRows reads every row of dir through the feed and returns the
// features and labels.
func readRows(t *testing.T, dir string, features int) ([][]float32, []int64, *feed.JobPlan) {
	t.Helper()
	ctx := context.Background()
	res := fsys.NewResolver(fsys.Options{})
	jp, err := plan.Plan(ctx, res, feed.PlanRequest{Inputs: []string{dir}, Ranks: 1, LabelColumn: datagen.LabelColumn})
	if err != nil {
		t.Fatal(err)
	}
	var xs [][]float32
	var ys []int64
	for _, s := range jp.Ranks[0] {
		r, err := feed.OpenSplit(ctx, res, s, feed.ReadOptions{Schema: jp.Schema, LabelColumn: datagen.LabelColumn})
		if err != nil {
			t.Fatal(err)
		}
		for {
			rec, err := r.Next(ctx)
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < int(rec.NumRows()); i++ {
				x := make([]float32, features)
				for j := range x {
					switch c := rec.Column(j).(type) {
					case *array.Float32:
						x[j] = c.Value(i)
					case *array.Float64: // CSV
						x[j] = float32(c.Value(i))
					}
				}
				xs = append(xs, x)
				ys = append(ys, rec.Column(features).(*array.Int64).Value(i))
			}
			rec.Release()
		}
		r.Close()
	}
	return xs, ys, jp
}

func TestGenerateFormats(t *testing.T) {
	for _, format := range []feed.Format{feed.FormatParquet, feed.FormatArrow, feed.FormatCSV} {
		t.Run(string(format), func(t *testing.T) {
			cfg := datagen.Config{Rows: 5003, Features: 5, Files: 3, Format: format, RowGroupRows: 500, Seed: 9, Classes: 2}
			m, dir := generate(t, cfg)
			var names []string
			entries, _ := os.ReadDir(dir)
			for _, e := range entries {
				names = append(names, e.Name())
			}
			want := fmt.Sprintf("model.json part-00000.%[1]s part-00001.%[1]s part-00002.%[1]s", format)
			if got := strings.Join(names, " "); got != want {
				t.Errorf("files %q, want %q (no temporary files left behind)", got, want)
			}
			var onDisk datagen.Model
			b, err := os.ReadFile(filepath.Join(dir, datagen.ModelFile))
			if err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(b, &onDisk); err != nil {
				t.Fatal(err)
			}
			if len(onDisk.Weights) != 1 || len(onDisk.Weights[0]) != 5 || onDisk.BayesAccuracy != m.BayesAccuracy {
				t.Errorf("model.json = %+v", onDisk)
			}
			if m.BayesAccuracy < 0.6 || m.BayesAccuracy > 0.99 {
				t.Errorf("Bayes accuracy %.3f: the task is trivial or hopeless", m.BayesAccuracy)
			}

			xs, ys, jp := readRows(t, dir, 5)
			if jp.TotalRows != 5003 || len(ys) != 5003 {
				t.Fatalf("read %d rows (plan %d), want 5003", len(ys), jp.TotalRows)
			}
			if format != feed.FormatCSV {
				for _, f := range jp.Files {
					if f.Units < 3 {
						t.Errorf("%s has %d row groups or batches, want several", f.URI, f.Units)
					}
				}
			}
			// The true model predicts the labels about as well as the
			// Bayes accuracy says: the labels come from the model.
			correct := 0
			for i, x := range xs {
				z := m.Bias[0]
				for j, v := range x {
					z += m.Weights[0][j] * float64(v)
				}
				if (z > 0) == (ys[i] == 1) {
					correct++
				}
			}
			acc := float64(correct) / float64(len(xs))
			if math.Abs(acc-m.BayesAccuracy) > 0.03 {
				t.Errorf("the true model's accuracy %.3f is far from the Bayes accuracy %.3f", acc, m.BayesAccuracy)
			}
		})
	}
}

func TestGenerateDeterministic(t *testing.T) {
	for _, format := range []feed.Format{feed.FormatParquet, feed.FormatArrow, feed.FormatCSV} {
		t.Run(string(format), func(t *testing.T) {
			cfg := datagen.Config{Rows: 300, Features: 3, Files: 2, Format: format, RowGroupRows: 100, Seed: 5, Classes: 2}
			_, a := generate(t, cfg)
			_, b := generate(t, cfg)
			cfg.Seed = 6
			_, c := generate(t, cfg)
			for _, name := range []string{"part-00001." + string(format), datagen.ModelFile} {
				fa, _ := os.ReadFile(filepath.Join(a, name))
				fb, _ := os.ReadFile(filepath.Join(b, name))
				fc, _ := os.ReadFile(filepath.Join(c, name))
				if len(fa) == 0 || !bytes.Equal(fa, fb) {
					t.Errorf("%s differs between two runs with the same seed", name)
				}
				if bytes.Equal(fa, fc) {
					t.Errorf("%s is the same for seeds 5 and 6", name)
				}
			}
		})
	}
}

func TestGenerateClasses(t *testing.T) {
	m, dir := generate(t, datagen.Config{Rows: 3000, Features: 4, Files: 1, Format: feed.FormatParquet, RowGroupRows: 1000, Seed: 2, Classes: 4})
	if len(m.Weights) != 4 || len(m.Bias) != 4 {
		t.Fatalf("%d weight vectors for 4 classes", len(m.Weights))
	}
	_, ys, _ := readRows(t, dir, 4)
	seen := map[int64]int{}
	for _, y := range ys {
		seen[y]++
	}
	for k := int64(0); k < 4; k++ {
		if seen[k] < 100 {
			t.Errorf("class %d drawn %d times of 3000", k, seen[k])
		}
	}
	if len(seen) != 4 {
		t.Errorf("labels %v, want 0..3", seen)
	}
}

func TestConfigValidate(t *testing.T) {
	tests := []struct {
		mod  func(*datagen.Config)
		want string
	}{
		{func(c *datagen.Config) { c.Out = "" }, "output directory"},
		{func(c *datagen.Config) { c.Rows = 0 }, "rows 0"},
		{func(c *datagen.Config) { c.Features = 0 }, "features 0"},
		{func(c *datagen.Config) { c.Files = 0 }, "files 0"},
		{func(c *datagen.Config) { c.Rows, c.Files = 2, 3 }, "3 files for 2 rows"},
		{func(c *datagen.Config) { c.RowGroupRows = 0 }, "row group rows 0"},
		{func(c *datagen.Config) { c.Classes = 1 }, "classes 1"},
		{func(c *datagen.Config) { c.Format = "orc" }, `"orc"`},
		{func(c *datagen.Config) { c.Compression = "lzma" }, `"lzma"`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			cfg := datagen.DefaultConfig()
			cfg.Out = t.TempDir()
			tt.mod(&cfg)
			_, err := datagen.Generate(context.Background(), cfg)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to mention %q", err, tt.want)
			}
		})
	}
}
