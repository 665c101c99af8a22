#!/usr/bin/env bash
# Regenerates the Go code of every .proto package (driver/driverpb, standalone/standalonepb and ps/pspb with
# its gRPC services, internal/hadoop/hadooppb, model/onnx/onnxpb); with --check, fails when the
# committed code differs from what would be generated.
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.5.1
command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler" >&2; exit 1; }
gobin=$(go env GOPATH)/bin
go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC
check=false
[ "${1:-}" = "--check" ] && check=true

stale=0
# package directory, and whether it holds gRPC services
for entry in driver/driverpb:grpc standalone/standalonepb:grpc ps/pspb:grpc internal/hadoop/hadooppb: model/onnx/onnxpb:; do
  pkg=$PWD/${entry%%:*}
  dest=$pkg
  if $check; then dest=$(mktemp -d); fi
  args=(--go_out="$dest" --go_opt=paths=source_relative)
  if [ "${entry#*:}" = grpc ]; then
    args+=(--go-grpc_out="$dest" --go-grpc_opt=paths=source_relative)
  fi
  (cd "$pkg" && PATH="$gobin:$PATH" protoc "${args[@]}" ./*.proto)
  if $check; then
    for f in "$dest"/*.go; do
      if ! cmp -s "$f" "$pkg/$(basename "$f")"; then
        echo "${entry%%:*}/$(basename "$f") is stale: run make proto" >&2
        stale=1
      fi
    done
    rm -rf "$dest"
  fi
done
if $check; then
  [ $stale -eq 0 ] && echo "generated code is up to date"
  exit $stale
fi
