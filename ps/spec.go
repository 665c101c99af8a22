package ps

import (
	"errors"
	"fmt"
	"math"

	"github.com/spindle-ml/spindle/ps/pspb"
)

// Optimizer names.
const (
	SGD     = "sgd"
	AdaGrad = "adagrad"
	Adam    = "adam"
	FTRL    = "ftrl"
)

// Initializer names.
const (
	Zeros   = "zeros"
	Uniform = "uniform"
	Normal  = "normal"
)

// ErrBadSpec is wrapped by every error about a table spec.
var ErrBadSpec = errors.New("ps: bad table spec")

// MaxDim bounds a row's length: a row is sent whole in every pull.
const MaxDim = 1 << 16

// TableSpec describes a table. The zero values of its optimizer fields
// take the usual defaults (Normalize).
type TableSpec = pspb.TableSpec

// Normalize checks spec and fills in the defaults of what it leaves zero:
// SGD, zeros, and each optimizer's usual hyper-parameters. Errors wrap
// ErrBadSpec and name the table and field.
func Normalize(spec *TableSpec) error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: table %q: %s", ErrBadSpec, spec.GetName(), fmt.Sprintf(format, args...))
	}
	if spec.GetName() == "" {
		return fmt.Errorf("%w: a table needs a name", ErrBadSpec)
	}
	if spec.Dim == 0 || spec.Dim > MaxDim {
		return bad("dim %d: want 1 to %d", spec.Dim, MaxDim)
	}
	if spec.Optimizer == nil {
		spec.Optimizer = &pspb.Optimizer{}
	}
	o := spec.Optimizer
	if o.Kind == "" {
		o.Kind = SGD
	}
	if o.LearningRate == 0 {
		o.LearningRate = 0.01
	}
	switch o.Kind {
	case SGD:
	case AdaGrad:
		if o.InitialAccumulator == 0 {
			o.InitialAccumulator = 0.1
		}
		if o.Epsilon == 0 {
			o.Epsilon = 1e-7
		}
	case Adam:
		if o.Beta1 == 0 {
			o.Beta1 = 0.9
		}
		if o.Beta2 == 0 {
			o.Beta2 = 0.999
		}
		if o.Epsilon == 0 {
			o.Epsilon = 1e-8
		}
		if o.Beta1 < 0 || o.Beta1 >= 1 || o.Beta2 < 0 || o.Beta2 >= 1 {
			return bad("adam betas %g, %g: want each in [0, 1)", o.Beta1, o.Beta2)
		}
	case FTRL:
		if o.FtrlBeta == 0 {
			o.FtrlBeta = 1
		}
		if o.L1 < 0 || o.L2 < 0 {
			return bad("ftrl l1 %g, l2 %g: want each ≥ 0", o.L1, o.L2)
		}
	default:
		return bad("optimizer %q: want sgd, adagrad, adam or ftrl", o.Kind)
	}
	if !(o.LearningRate > 0) || math.IsInf(float64(o.LearningRate), 0) {
		return bad("learning rate %g: want a positive number", o.LearningRate)
	}
	if spec.Initializer == nil {
		spec.Initializer = &pspb.Initializer{}
	}
	in := spec.Initializer
	switch in.Kind {
	case "":
		in.Kind = Zeros
	case Zeros, Uniform, Normal:
	default:
		return bad("initializer %q: want zeros, uniform or normal", in.Kind)
	}
	if in.Kind != Zeros && !(in.Scale > 0) {
		return bad("initializer %s needs a positive scale, got %g", in.Kind, in.Scale)
	}
	if o.Kind == FTRL && in.Kind != Zeros {
		return bad("ftrl tables start at zero (its weights follow from its slots): use the zeros initializer")
	}
	return nil
}

// SlotsPerValue is how many float32 slots the optimizer keeps per weight.
func SlotsPerValue(kind string) int {
	switch kind {
	case AdaGrad:
		return 1 // the sum of squared gradients
	case Adam, FTRL:
		return 2 // first and second moments; FTRL's z and n
	}
	return 0
}

// Staleness is a job's consistency model: how many steps a worker may run
// ahead of the slowest. 0 is BSP; Async (ASP) is no bound.
type Staleness int

// Async is ASP: workers never wait for each other.
const Async Staleness = -1

func (s Staleness) String() string {
	switch {
	case s < 0:
		return "ASP"
	case s == 0:
		return "BSP"
	}
	return fmt.Sprintf("SSP(%d)", int(s))
}

// ParseStaleness reads spindle.ps.staleness: bsp, asp, or a bound.
func ParseStaleness(v string) (Staleness, error) {
	switch v {
	case "", "bsp", "BSP", "0":
		return 0, nil
	case "asp", "ASP", "inf", "∞":
		return Async, nil
	}
	var n int
	if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 0 || fmt.Sprint(n) != v {
		return 0, fmt.Errorf("staleness %q: want bsp, asp or a number of steps ≥ 0", v)
	}
	return Staleness(n), nil
}
