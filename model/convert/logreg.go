package convert

import (
	"fmt"

	"github.com/spindle-ml/spindle/model/onnx"
	pb "github.com/spindle-ml/spindle/model/onnx/onnxpb"
)

// LogRegFile is the checkpoint examples/logreg writes into the job's
// checkpoint directory.
const LogRegFile = "logreg.json"

// LogReg is a binary logistic regression, p(y=1|x) = sigmoid(w·x + b): the
// checkpoint examples/logreg writes (as JSON) and what an ONNX model of
// one gives back.
type LogReg struct {
	Weights []float64 `json:"weights"`
	Bias    float64   `json:"bias"`
	Epochs  int       `json:"epochs"`
}

// Names inside a logistic-regression ONNX model.
const (
	LogRegInput   = "features"
	LogRegOutput  = "probability"
	LogRegWeights = "logreg.weights"
	LogRegBias    = "logreg.bias"
)

// LogRegToONNX returns the ONNX model of lr: features float[N,F] in,
// probability double[N,1] out. The features are cast to double before
// the product, as the trainer computes, so the scores match its own.
func LogRegToONNX(lr LogReg, producerVersion string) (*pb.ModelProto, error) {
	f := int64(len(lr.Weights))
	if f == 0 {
		return nil, fmt.Errorf("the logistic regression has no weights")
	}
	g := &pb.GraphProto{
		Name: "logreg",
		Node: []*pb.NodeProto{
			onnx.Node("Cast", "cast", []string{LogRegInput}, []string{"features_double"}, onnx.AttrInt("to", int64(onnx.Double))),
			onnx.Node("MatMul", "matmul", []string{"features_double", LogRegWeights}, []string{"logit_nobias"}),
			onnx.Node("Add", "add", []string{"logit_nobias", LogRegBias}, []string{"logit"}),
			onnx.Node("Sigmoid", "sigmoid", []string{"logit"}, []string{LogRegOutput}),
		},
		Initializer: []*pb.TensorProto{
			onnx.DoubleTensor(LogRegWeights, []int64{f, 1}, lr.Weights),
			onnx.DoubleTensor(LogRegBias, []int64{1}, []float64{lr.Bias}),
		},
		Input:  []*pb.ValueInfoProto{onnx.Value(LogRegInput, onnx.Float, -1, f)},
		Output: []*pb.ValueInfoProto{onnx.Value(LogRegOutput, onnx.Double, -1, 1)},
	}
	return onnx.NewModel(g, producerVersion), nil
}

// LogRegFromONNX reads a logistic regression's weights back from an ONNX
// model LogRegToONNX wrote. features is the feed's feature count (0 when
// unknown); a model of another width is refused, naming both.
func LogRegFromONNX(m *pb.ModelProto, where string, features int) (LogReg, error) {
	wt, ok := onnx.Initializer(m, LogRegWeights)
	if !ok {
		return LogReg{}, marked(ErrMismatch, "%s: no initializer %q: not a logistic-regression model spindle exported", where, LogRegWeights)
	}
	bt, ok := onnx.Initializer(m, LogRegBias)
	if !ok {
		return LogReg{}, marked(ErrMismatch, "%s: no initializer %q: not a logistic-regression model spindle exported", where, LogRegBias)
	}
	if len(wt.Dims) != 2 || wt.Dims[1] != 1 {
		return LogReg{}, marked(ErrMismatch, "%s: %s has shape %v, want [features, 1]", where, LogRegWeights, wt.Dims)
	}
	if features > 0 && wt.Dims[0] != int64(features) {
		return LogReg{}, marked(ErrMismatch, "%s: %s has %d features but the feed gives %d", where, LogRegWeights, wt.Dims[0], features)
	}
	w, err := onnx.Float64s(wt)
	if err != nil {
		return LogReg{}, fmt.Errorf("%s: %w", where, err)
	}
	b, err := onnx.Float64s(bt)
	if err != nil || len(b) != 1 {
		return LogReg{}, fmt.Errorf("%s: %s: want one value (shape %v): %v", where, LogRegBias, bt.Dims, err)
	}
	return LogReg{Weights: w, Bias: b[0]}, nil
}
