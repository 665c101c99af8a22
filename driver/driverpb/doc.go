// Package driverpb holds the gRPC definition of the job control plane that
// the driver serves and executors call (control.proto), the task contract
// between them (task.proto: the one typed message a driver hands each
// executor, with conversions from and to the feed package's types), and
// the code generated from them. Regenerate with `make proto`; `make proto-check` fails
// when the committed code drifts.
package driverpb

//go:generate ../../scripts/protoc.sh
