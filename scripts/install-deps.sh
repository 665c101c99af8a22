#!/usr/bin/env bash
# Installs the Debian packages Spindle's tests and examples use, when missing:
# PyTorch and numpy for the Python package and the PyTorch example.
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}
if "$python" -c 'import numpy, torch' >/dev/null 2>&1; then
  exit 0
fi
echo "installing python3-torch and python3-numpy (Debian packages)..."
sudo=""
if [ "$(id -u)" -ne 0 ]; then
  command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install python3-torch python3-numpy" >&2; exit 1; }
  sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
$sudo apt-get install -y -q --no-install-recommends python3-torch python3-numpy
"$python" -c 'import numpy, torch' || { echo "python3-torch installed but torch does not import with $python" >&2; exit 1; }
