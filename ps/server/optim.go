package server

import (
	"math"

	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/ps/pspb"
)

// optimizer applies one key's gradient to its row. w is the row's weights,
// slots its optimizer state (SlotsPerValue(kind) × dim values after the
// weights), step the number of updates the row had before this one.
type optimizer func(w, slots, g []float32, step int32)

func newOptimizer(o *pspb.Optimizer) optimizer {
	lr := o.LearningRate
	switch o.Kind {
	case ps.AdaGrad:
		eps := o.Epsilon
		return func(w, acc, g []float32, _ int32) {
			w, acc = w[:len(g)], acc[:len(g)]
			n := adaGradVector(w, acc, g, lr, eps)
			adaGradScalar(w[n:], acc[n:], g[n:], lr, eps)
		}
	case ps.Adam:
		b1, b2, eps := float64(o.Beta1), float64(o.Beta2), o.Epsilon
		return func(w, slots, g []float32, step int32) {
			d := len(g)
			m, v := slots[:d], slots[d:2*d]
			t := float64(step + 1)
			// The bias corrections folded into the step size.
			alpha := float32(float64(lr) * math.Sqrt(1-math.Pow(b2, t)) / (1 - math.Pow(b1, t)))
			for i, gi := range g {
				m[i] = float32(b1)*m[i] + float32(1-b1)*gi
				v[i] = float32(b2)*v[i] + float32(1-b2)*gi*gi
				w[i] -= alpha * m[i] / (float32(math.Sqrt(float64(v[i]))) + eps)
			}
		}
	case ps.FTRL:
		// FTRL-proximal (McMahan et al., 2013): z and n per weight; the
		// weight follows from them, and is exactly 0 while |z| ≤ l1.
		alpha, beta, l1, l2 := float64(lr), float64(o.FtrlBeta), float64(o.L1), float64(o.L2)
		return func(w, slots, g []float32, _ int32) {
			d := len(g)
			z, n := slots[:d], slots[d:2*d]
			for i, gi := range g {
				g64 := float64(gi)
				nOld := float64(n[i])
				nNew := nOld + g64*g64
				sigma := (math.Sqrt(nNew) - math.Sqrt(nOld)) / alpha
				zi := float64(z[i]) + g64 - sigma*float64(w[i])
				z[i], n[i] = float32(zi), float32(nNew)
				if math.Abs(zi) <= l1 {
					w[i] = 0
					continue
				}
				sign := 1.0
				if zi < 0 {
					sign = -1
				}
				w[i] = float32(-(zi - sign*l1) / ((beta+math.Sqrt(nNew))/alpha + l2))
			}
		}
	}
	return func(w, _, g []float32, _ int32) {
		for i, gi := range g {
			w[i] -= lr * gi
		}
	}
}

// adaGradScalar is AdaGrad's update of one row, one value at a time.
func adaGradScalar(w, acc, g []float32, lr, eps float32) {
	for i, gi := range g {
		acc[i] += gi * gi
		w[i] -= lr * gi / (float32(math.Sqrt(float64(acc[i]))) + eps)
	}
}

// initRow fills a new row's weights for key: a function of the table's
// seed and the key alone, so every replica and restart agrees. Its slots
// start at the optimizer's starting values.
func initRow(spec *pspb.TableSpec, key uint64, w, slots []float32) {
	in := spec.Initializer
	switch in.Kind {
	case ps.Uniform, ps.Normal:
		state := ps.HashKey(key ^ in.Seed*0x9e3779b97f4a7c15)
		next := func() float64 { // uniform in (0, 1)
			state += 0x9e3779b97f4a7c15
			return (float64(ps.HashKey(state)>>11) + 0.5) / (1 << 53)
		}
		for i := range w {
			if in.Kind == ps.Uniform {
				w[i] = float32((2*next() - 1) * float64(in.Scale))
				continue
			}
			// Box–Muller.
			w[i] = float32(math.Sqrt(-2*math.Log(next())) * math.Cos(2*math.Pi*next()) * float64(in.Scale))
		}
	default:
		clear(w)
	}
	clear(slots)
	if spec.Optimizer.Kind == ps.AdaGrad {
		for i := range slots {
			slots[i] = spec.Optimizer.InitialAccumulator
		}
	}
}
