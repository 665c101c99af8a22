#!/usr/bin/env bash
# Builds the spindle-ml wheel into ${OUT:-dist}: the spindle binary, built
# with the Python package's version, the package and the Spark pusher's jar
# (scripts/build-spark-jar.sh; scripts/build-wheel.py packs them).
#
# GOARCH picks the target (amd64 here by default; arm64 cross-builds). The
# binary's UCX data link needs cgo (it dlopens libucp at run time, so the
# wheel never links UCX itself): a native build uses cgo when a C compiler
# is there; a cross build uses cgo with $CC (aarch64-linux-gnu-gcc from
# Debian's gcc-aarch64-linux-gnu when installed), else builds without cgo,
# a binary with the TCP data link only (spindle version says so).
set -euo pipefail
cd "$(dirname "$0")/.."
python=${PYTHON:-/usr/bin/python3}
out=${OUT:-dist}
goarch=${GOARCH:-$(go env GOARCH)}
version=$(sed -n 's/^__version__ = "\(.*\)"$/\1/p' python/spindle/_version.py)
[ -n "$version" ] || { echo "build-wheel: no __version__ in python/spindle/_version.py" >&2; exit 2; }
commit=$(git rev-parse HEAD 2>/dev/null || true)

cgo=${CGO_ENABLED:-}
cc=${CC:-}
if [ -z "$cgo" ]; then
  if [ "$goarch" = "$(go env GOHOSTARCH)" ]; then
    cgo=1
  else
    case $goarch in
      arm64) cc=${cc:-aarch64-linux-gnu-gcc} ;;
      amd64) cc=${cc:-x86_64-linux-gnu-gcc} ;;
    esac
    if command -v "$cc" >/dev/null 2>&1; then cgo=1; else
      echo "build-wheel: no $cc for a cgo cross build to $goarch: building without cgo (no UCX data link)" >&2
      cgo=0 cc=
    fi
  fi
fi
scripts/build-spark-jar.sh
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
GOOS=linux GOARCH=$goarch CGO_ENABLED=$cgo ${cc:+CC=$cc} go build -trimpath \
  -ldflags "-X main.version=$version -X main.commit=$commit" -o "$bin/spindle" ./cmd/spindle
"$python" scripts/build-wheel.py --binary "$bin/spindle" --version "$version" --src python --out "$out"
