// Package standalonepb holds the gRPC definitions of the standalone cluster
// manager (standalone.proto): the Master service that drivers, workers and
// admin commands call, and the Worker service the leading master calls.
// Regenerate with `make proto`; `make proto-check` fails when the committed
// code drifts.
package standalonepb

//go:generate ../../scripts/protoc.sh
