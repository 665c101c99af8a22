package main

import (
	"math"
	"math/rand/v2"

	"github.com/spindle-ml/spindle/ps"
)

// dataset generates Criteo-like rows from a known sparse logistic model:
// fields categorical features, each value drawn from a Zipf law over
// vocab values (so a few values are hot), and a true weight for the hot
// values of each field only. The labels follow the model, so its own AUC
// is the best any learner can reach on the same rows.
type dataset struct {
	fields int
	vocab  uint64
	zipf   float64
	hot    uint64
	seed   uint64
	bias   float64
	scale  float64
}

// valueBits is how many bits of a feature id hold the value: ids are
// field<<valueBits | value, 2^24 and more for 16 fields or more.
const valueBits = 20

// biasKey is the intercept's key, outside every field's ids.
const biasKey = uint64(1) << 40

func (d dataset) key(field int, value uint64) uint64 { return uint64(field)<<valueBits | value }

// trueWeight is the model's weight of a value: nonzero only for the hot
// values, a function of (seed, key) alone.
func (d dataset) trueWeight(key uint64) float64 {
	if key&(1<<valueBits-1) >= d.hot {
		return 0
	}
	h := ps.HashKey(key ^ d.seed*0x9e3779b97f4a7c15)
	u1 := (float64(h>>11) + 0.5) / (1 << 53)
	u2 := (float64(ps.HashKey(h)>>11) + 0.5) / (1 << 53)
	return math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2) * d.scale
}

// rows streams n rows of stream (a worker's index, or the held-out set):
// fn gets each row's keys (without the bias) and label.
type rowStream struct {
	d     dataset
	rng   *rand.Rand
	zipfs []*rand.Zipf
	keys  []uint64
}

func (d dataset) stream(stream uint64) *rowStream {
	rng := rand.New(rand.NewPCG(d.seed, stream))
	s := &rowStream{d: d, rng: rng, keys: make([]uint64, d.fields)}
	for range d.fields {
		s.zipfs = append(s.zipfs, rand.NewZipf(rng, d.zipf, 1, d.vocab-1))
	}
	return s
}

// next returns the next row's keys (valid until the next call), its
// label, and the model's logit for it.
func (s *rowStream) next() ([]uint64, float32, float64) {
	logit := s.d.bias
	for f, z := range s.zipfs {
		k := s.d.key(f, z.Uint64())
		s.keys[f] = k
		logit += s.d.trueWeight(k)
	}
	var y float32
	if s.rng.Float64() < sigmoid(logit) {
		y = 1
	}
	return s.keys, y, logit
}

func sigmoid(x float64) float64 { return 1 / (1 + math.Exp(-x)) }
