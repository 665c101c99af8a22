// Package predict is batch inference: it scores a data set with an ONNX
// model on the cluster, as one Spindle job.
//
// Before anything runs it reads the model's declared inputs and outputs
// (from manifest.json when the model has one, else from the ONNX file
// itself), binds every model input to columns of the input data, and
// refuses, naming both, an input the data cannot give. The job's
// executors then run the spindle Python package's predict worker
// (python -m spindle.predict), which drives ONNX Runtime over the rank's
// pushed Arrow feed and writes one Parquet file per split, atomically and
// under a name that depends on the split alone: a split scored again
// after an executor was lost replaces its file, so the output holds every
// row exactly once. When the job has succeeded the output gets _SUCCESS.
package predict
