// Package datagen writes synthetic classification data drawn from a known
// logistic model, so that a training job's result can be checked against
// the truth: the model's weights and the best accuracy any classifier can
// reach on the data (the Bayes accuracy).
//
// Features f0..f{F-1} are float32 drawn from N(0, 1). With two classes the
// label (int64, 0 or 1) is drawn from Bernoulli(sigmoid(w·x + b)); with K
// classes from the softmax of K linear scores. The data is split across
// part-00000.<ext>, part-00001.<ext>, ... as Parquet (several row groups
// per file), Arrow IPC files (several record batches per file) or CSV with
// a header line, and model.json records the model. Everything is
// deterministic for a seed, and every file is written atomically.
package datagen

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"path/filepath"
	"strconv"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"github.com/apache/arrow-go/v18/arrow/memory"
	"github.com/apache/arrow-go/v18/parquet"
	"github.com/apache/arrow-go/v18/parquet/compress"
	"github.com/apache/arrow-go/v18/parquet/pqarrow"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/fsys"
)

// LabelColumn is the name of the label column.
const LabelColumn = "label"

// ModelFile is the name of the file describing the model, beside the data.
const ModelFile = "model.json"

// Config says what to generate.
type Config struct {
	// Out is the local directory to write into; it is created if missing.
	Out string
	// Rows is the total number of rows, spread evenly over Files files.
	Rows int64
	// Features is the number of float32 feature columns.
	Features int
	// Files is the number of data files.
	Files int
	// Format is the file format.
	Format feed.Format
	// RowGroupRows is the rows per Parquet row group or Arrow record batch
	// (CSV files ignore it).
	RowGroupRows int
	// Seed makes the output reproducible.
	Seed int64
	// Classes is the number of label values (2 for binary classification).
	Classes int
	// Compression is the Parquet codec: snappy, zstd or none.
	Compression string
}

// DefaultConfig returns a small binary classification set in Parquet.
func DefaultConfig() Config {
	return Config{Rows: 100000, Features: 16, Files: 4, Format: feed.FormatParquet,
		RowGroupRows: 8192, Seed: 1, Classes: 2, Compression: "snappy"}
}

// Validate reports the first problem with the configuration.
func (c Config) Validate() error {
	switch {
	case c.Out == "":
		return fmt.Errorf("datagen: no output directory")
	case c.Rows < 1:
		return fmt.Errorf("datagen: rows %d: need at least 1", c.Rows)
	case c.Features < 1:
		return fmt.Errorf("datagen: features %d: need at least 1", c.Features)
	case c.Files < 1:
		return fmt.Errorf("datagen: files %d: need at least 1", c.Files)
	case int64(c.Files) > c.Rows:
		return fmt.Errorf("datagen: %d files for %d rows: every file needs a row", c.Files, c.Rows)
	case c.RowGroupRows < 1:
		return fmt.Errorf("datagen: row group rows %d: need at least 1", c.RowGroupRows)
	case c.Classes < 2:
		return fmt.Errorf("datagen: classes %d: need at least 2", c.Classes)
	}
	if _, err := feed.ParseFormat(string(c.Format)); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	if _, err := codec(c.Compression); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	return nil
}

func codec(name string) (compress.Compression, error) {
	switch name {
	case "", "snappy":
		return compress.Codecs.Snappy, nil
	case "zstd":
		return compress.Codecs.Zstd, nil
	case "none", "uncompressed":
		return compress.Codecs.Uncompressed, nil
	}
	return 0, fmt.Errorf("unknown compression %q (want snappy, zstd or none)", name)
}

// Model is the generating model, as written to model.json.
type Model struct {
	Features int `json:"features"`
	Classes  int `json:"classes"`
	// Weights holds one weight vector for two classes (the logit of class
	// 1 is Weights[0]·x + Bias[0]) and one per class for more (softmax).
	Weights [][]float64 `json:"weights"`
	Bias    []float64   `json:"bias"`
	// BayesAccuracy is the accuracy of predicting the most probable class
	// under the true model, averaged over the generated rows: no
	// classifier can expect to do better on this data.
	BayesAccuracy float64 `json:"bayes_accuracy"`
	// LabelColumn and FeatureColumns name the columns.
	LabelColumn    string   `json:"label_column"`
	FeatureColumns []string `json:"feature_columns"`
	Rows           int64    `json:"rows"`
	Seed           int64    `json:"seed"`
	Format         string   `json:"format"`
	// Files are the data files' names, relative to the output directory.
	Files []string `json:"files"`
}

// signalNorm is the length of every weight vector: large enough that the
// labels are learnable, small enough that they stay noisy (a Bayes
// accuracy near 0.87 for two classes).
const signalNorm = 3.0

// newModel draws the model's weights from the seed.
func newModel(cfg Config) Model {
	rng := rand.New(rand.NewPCG(uint64(cfg.Seed), 0x6d6f64656c))
	k := cfg.Classes
	if k == 2 {
		k = 1
	}
	m := Model{Features: cfg.Features, Classes: cfg.Classes, Weights: make([][]float64, k), Bias: make([]float64, k),
		LabelColumn: LabelColumn, Rows: cfg.Rows, Seed: cfg.Seed, Format: string(cfg.Format)}
	for i := range m.Weights {
		w := make([]float64, cfg.Features)
		var norm float64
		for j := range w {
			w[j] = rng.NormFloat64()
			norm += w[j] * w[j]
		}
		norm = math.Sqrt(norm)
		for j := range w {
			w[j] *= signalNorm / norm
		}
		m.Weights[i] = w
		m.Bias[i] = 0.25 * rng.NormFloat64()
	}
	for j := 0; j < cfg.Features; j++ {
		m.FeatureColumns = append(m.FeatureColumns, "f"+strconv.Itoa(j))
	}
	return m
}

// probs writes the class probabilities of x into p.
func (m *Model) probs(x []float32, p []float64) {
	if m.Classes == 2 {
		z := m.Bias[0]
		for j, v := range x {
			z += m.Weights[0][j] * float64(v)
		}
		p[1] = 1 / (1 + math.Exp(-z))
		p[0] = 1 - p[1]
		return
	}
	most := math.Inf(-1)
	for k := range p {
		z := m.Bias[k]
		for j, v := range x {
			z += m.Weights[k][j] * float64(v)
		}
		p[k] = z
		most = math.Max(most, z)
	}
	var sum float64
	for k := range p {
		p[k] = math.Exp(p[k] - most)
		sum += p[k]
	}
	for k := range p {
		p[k] /= sum
	}
}

// Generate writes the data set and model.json into cfg.Out and returns
// the model.
func Generate(ctx context.Context, cfg Config) (Model, error) {
	if cfg.Compression == "" {
		cfg.Compression = "snappy"
	}
	if err := cfg.Validate(); err != nil {
		return Model{}, err
	}
	format, _ := feed.ParseFormat(string(cfg.Format))
	cfg.Format = format
	out, err := filepath.Abs(cfg.Out)
	if err != nil {
		return Model{}, fmt.Errorf("datagen: %w", err)
	}
	lfs := fsys.Local()
	if err := lfs.MkdirAll(ctx, filepath.ToSlash(out)); err != nil {
		return Model{}, fmt.Errorf("datagen: create %s: %w", out, err)
	}
	m := newModel(cfg)
	ext := map[feed.Format]string{feed.FormatParquet: ".parquet", feed.FormatArrow: ".arrow", feed.FormatCSV: ".csv"}[format]

	var bayes float64
	for i := 0; i < cfg.Files; i++ {
		rows := cfg.Rows / int64(cfg.Files)
		if int64(i) < cfg.Rows%int64(cfg.Files) {
			rows++
		}
		name := fmt.Sprintf("part-%05d%s", i, ext)
		sum, err := writeFile(ctx, lfs, filepath.ToSlash(filepath.Join(out, name)), cfg, &m, i, rows)
		if err != nil {
			return Model{}, err
		}
		bayes += sum
		m.Files = append(m.Files, name)
	}
	m.BayesAccuracy = bayes / float64(cfg.Rows)

	js, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return Model{}, fmt.Errorf("datagen: encode the model: %w", err)
	}
	if err := writeAtomic(ctx, lfs, filepath.ToSlash(filepath.Join(out, ModelFile)), func(w io.Writer) error {
		_, err := w.Write(append(js, '\n'))
		return err
	}); err != nil {
		return Model{}, err
	}
	return m, nil
}

// writeAtomic publishes name only when write succeeds.
func writeAtomic(ctx context.Context, lfs fsys.FS, name string, write func(io.Writer) error) error {
	af, err := lfs.CreateAtomic(ctx, name)
	if err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	if err := write(af); err != nil {
		af.Abort()
		return fmt.Errorf("datagen: write %s: %w", name, err)
	}
	if err := af.Commit(); err != nil {
		return fmt.Errorf("datagen: %w", err)
	}
	return nil
}

// schema is the data's Arrow schema.
func schema(features int) *arrow.Schema {
	fields := make([]arrow.Field, 0, features+1)
	for j := 0; j < features; j++ {
		fields = append(fields, arrow.Field{Name: "f" + strconv.Itoa(j), Type: arrow.PrimitiveTypes.Float32})
	}
	fields = append(fields, arrow.Field{Name: LabelColumn, Type: arrow.PrimitiveTypes.Int64})
	return arrow.NewSchema(fields, nil)
}

// chunkGen draws rows for one file, a chunk at a time.
type chunkGen struct {
	m     *Model
	rng   *rand.Rand
	x     []float32
	p     []float64
	bayes float64 // sum over rows of the most probable class's probability
}

func newChunkGen(cfg Config, m *Model, file int) *chunkGen {
	return &chunkGen{m: m, rng: rand.New(rand.NewPCG(uint64(cfg.Seed), uint64(file)+1)),
		x: make([]float32, cfg.Features), p: make([]float64, cfg.Classes)}
}

// row draws one row into g.x and returns its label.
func (g *chunkGen) row() int64 {
	for j := range g.x {
		g.x[j] = float32(g.rng.NormFloat64())
	}
	g.m.probs(g.x, g.p)
	// Inverse-CDF sampling of the class.
	u := g.rng.Float64()
	label := int64(len(g.p) - 1)
	var acc float64
	for k := 0; k < len(g.p)-1; k++ {
		acc += g.p[k]
		if u < acc {
			label = int64(k)
			break
		}
	}
	best := 0.0
	for _, pk := range g.p {
		best = math.Max(best, pk)
	}
	g.bayes += best
	return label
}

// record draws n rows as a record batch.
func (g *chunkGen) record(sc *arrow.Schema, n int) arrow.RecordBatch {
	b := array.NewRecordBuilder(memory.DefaultAllocator, sc)
	defer b.Release()
	nf := len(g.x)
	for j := 0; j < nf; j++ {
		b.Field(j).(*array.Float32Builder).Reserve(n)
	}
	labels := b.Field(nf).(*array.Int64Builder)
	labels.Reserve(n)
	for r := 0; r < n; r++ {
		y := g.row()
		for j, v := range g.x {
			b.Field(j).(*array.Float32Builder).UnsafeAppend(v)
		}
		labels.UnsafeAppend(y)
	}
	return b.NewRecordBatch()
}

// recordWriter is what the Parquet and Arrow IPC file writers share.
type recordWriter interface {
	Write(arrow.RecordBatch) error
	Close() error
}

// writeFile writes one data file of rows rows and returns its Bayes sum.
func writeFile(ctx context.Context, lfs fsys.FS, name string, cfg Config, m *Model, file int, rows int64) (float64, error) {
	g := newChunkGen(cfg, m, file)
	sc := schema(cfg.Features)
	chunks := func(emit func(n int) error) error {
		for left := rows; left > 0; {
			if err := ctx.Err(); err != nil {
				return err
			}
			n := int(min(left, int64(cfg.RowGroupRows)))
			if err := emit(n); err != nil {
				return err
			}
			left -= int64(n)
		}
		return nil
	}
	// writeAll writes every chunk as a record batch, then closes fw.
	writeAll := func(fw recordWriter) error {
		err := chunks(func(n int) error {
			rec := g.record(sc, n)
			defer rec.Release()
			return fw.Write(rec)
		})
		if cerr := fw.Close(); err == nil {
			err = cerr
		}
		return err
	}
	var write func(io.Writer) error
	switch cfg.Format {
	case feed.FormatParquet:
		write = func(w io.Writer) error {
			c, _ := codec(cfg.Compression)
			props := parquet.NewWriterProperties(parquet.WithCompression(c), parquet.WithMaxRowGroupLength(int64(cfg.RowGroupRows)),
				parquet.WithDictionaryDefault(false))
			fw, err := pqarrow.NewFileWriter(sc, w, props, pqarrow.DefaultWriterProps())
			if err != nil {
				return err
			}
			return writeAll(fw)
		}
	case feed.FormatArrow:
		write = func(w io.Writer) error {
			fw, err := ipc.NewFileWriter(w, ipc.WithSchema(sc))
			if err != nil {
				return err
			}
			return writeAll(fw)
		}
	case feed.FormatCSV:
		write = func(w io.Writer) error {
			bw := bufio.NewWriterSize(w, 1<<20)
			line := make([]byte, 0, 16*cfg.Features)
			for j := range cfg.Features {
				line = append(line, 'f')
				line = strconv.AppendInt(line, int64(j), 10)
				line = append(line, ',')
			}
			line = append(line, LabelColumn...)
			line = append(line, '\n')
			if _, err := bw.Write(line); err != nil {
				return err
			}
			err := chunks(func(n int) error {
				for r := 0; r < n; r++ {
					y := g.row()
					line = line[:0]
					for _, v := range g.x {
						line = strconv.AppendFloat(line, float64(v), 'g', -1, 32)
						line = append(line, ',')
					}
					line = strconv.AppendInt(line, y, 10)
					line = append(line, '\n')
					if _, err := bw.Write(line); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
			return bw.Flush()
		}
	}
	if err := writeAtomic(ctx, lfs, name, write); err != nil {
		return 0, err
	}
	return g.bayes, nil
}
