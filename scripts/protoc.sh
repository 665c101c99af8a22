#!/usr/bin/env bash
# Regenerates internal/controlpb from its .proto files; with --check, fails
# when the committed code differs from what would be generated.
set -euo pipefail
cd "$(dirname "$0")/.."
PROTOC_GEN_GO=v1.36.12
PROTOC_GEN_GO_GRPC=v1.5.1
command -v protoc >/dev/null || { echo "protoc missing: apt-get install -y protobuf-compiler" >&2; exit 1; }
gobin=$(go env GOPATH)/bin
go install google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO
go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC

pkg=$PWD/internal/controlpb
dest=$pkg
if [ "${1:-}" = "--check" ]; then
  dest=$(mktemp -d)
  trap 'rm -rf "$dest"' EXIT
fi
(cd "$pkg" && PATH="$gobin:$PATH" protoc \
  --go_out="$dest" --go_opt=paths=source_relative \
  --go-grpc_out="$dest" --go-grpc_opt=paths=source_relative ./*.proto)

if [ "$dest" != "$pkg" ]; then
  for f in "$dest"/*.go; do
    if ! cmp -s "$f" "$pkg/$(basename "$f")"; then
      echo "internal/controlpb/$(basename "$f") is stale: run make proto" >&2
      exit 1
    fi
  done
  echo "generated code is up to date"
fi
