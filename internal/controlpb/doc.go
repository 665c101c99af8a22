// Package controlpb holds the gRPC definitions of Spindle's control plane
// (control.proto) and the code generated from them. Regenerate with
// `make proto`; `make proto-check` fails when the committed code drifts.
package controlpb

//go:generate protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative control.proto
