#!/usr/bin/env bash
# Installs what Spindle's tests and examples use, when missing: each entry
# below is a Debian package and the check that says it is already there.
# Idempotent and quiet when everything is present.
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}

missing=()
# need PACKAGE CHECK...: install PACKAGE unless CHECK succeeds.
need() {
  local pkg=$1; shift
  "$@" >/dev/null 2>&1 || missing+=("$pkg")
}

need python3-torch "$python" -c 'import torch'
need python3-numpy "$python" -c 'import numpy'
need python3-venv "$python" -c 'import ensurepip, venv'
# Headless Chromium drives the web UI's page tests.
need chromium sh -c 'command -v chromium'

if [ ${#missing[@]} -gt 0 ]; then
  echo "installing ${missing[*]} (Debian packages)..."
  sudo=""
  if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null || { echo "need root (or sudo) to apt-get install ${missing[*]}" >&2; exit 1; }
    sudo=sudo
  fi
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -q
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
"$python" -c 'import numpy, torch' || { echo "python3-torch installed but torch does not import with $python" >&2; exit 1; }
