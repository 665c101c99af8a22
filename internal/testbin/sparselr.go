package testbin

// A short training run of examples/sparse-lr that still ends within 0.01
// AUC of the model that made its data: --rows SparseLRRows --hot
// SparseLRHot, 80,000 rows per worker drawn from a model of 20 hot values
// per field, learned about as closely (some 0.006 AUC short on 2 workers
// and 2 servers, under BSP and SSP) as the example's defaults (200,000
// rows, 100 hot values) learn theirs, in about half the CPU (4.6 CPU-s a
// job against 8.8).
const (
	SparseLRRows = "80000"
	SparseLRHot  = "20"
	// SparseLRSteps is the steps each worker takes: its rows over the
	// example's 1,000 rows per step.
	SparseLRSteps = 80
)
