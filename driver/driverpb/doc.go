// Package driverpb holds the gRPC definition of the job control plane that
// the driver serves and executors call (control.proto), and the code
// generated from it. Regenerate with `make proto`; `make proto-check` fails
// when the committed code drifts.
package driverpb

//go:generate ../../scripts/protoc.sh
