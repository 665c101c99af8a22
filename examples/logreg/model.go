package main

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"math"

	"github.com/spindle-ml/spindle/feed/wire"
)

// model is a binary logistic regression: p(y=1|x) = sigmoid(w·x + b).
type model struct {
	w []float64
	b float64
}

func newModel(features int) *model { return &model{w: make([]float64, features)} }

// gradient writes the mean gradient of the log loss over batch into grad
// (weights, then bias) and returns the summed loss and the number of
// correct predictions, both before the step.
func (m *model) gradient(batch wire.TensorBatch, grad []float64) (lossSum float64, correct int) {
	f := len(m.w)
	for i := range grad {
		grad[i] = 0
	}
	for r := 0; r < batch.Rows; r++ {
		x := batch.Features[r*f : (r+1)*f]
		z := m.b
		for j, v := range x {
			z += m.w[j] * float64(v)
		}
		p := 1 / (1 + math.Exp(-z))
		y := float64(batch.Labels[r])
		if (p >= 0.5) == (y >= 0.5) {
			correct++
		}
		lossSum -= y*math.Log(math.Max(p, 1e-12)) + (1-y)*math.Log(math.Max(1-p, 1e-12))
		d := p - y
		for j, v := range x {
			grad[j] += d * float64(v)
		}
		grad[f] += d
	}
	if batch.Rows > 0 {
		inv := 1 / float64(batch.Rows)
		for i := range grad {
			grad[i] *= inv
		}
	}
	return lossSum, correct
}

// step applies one SGD update.
func (m *model) step(grad []float64, lr, l2 float64) {
	for j := range m.w {
		m.w[j] -= lr * (grad[j] + l2*m.w[j])
	}
	m.b -= lr * grad[len(m.w)]
}

// fingerprint hashes the exact bits of the parameters, so ranks can be
// compared for identical weights.
func (m *model) fingerprint() string {
	h := sha256.New()
	var buf [8]byte
	for _, v := range append(append([]float64(nil), m.w...), m.b) {
		binary.LittleEndian.PutUint64(buf[:], math.Float64bits(v))
		h.Write(buf[:])
	}
	return hex.EncodeToString(h.Sum(nil))[:12]
}
