#!/usr/bin/env bash
# Installs what Spindle's tests and examples use, when missing: each entry
# below is a Debian package and the check that says it is already there.
# Idempotent and quiet when everything is present. With --debian-only it
# installs just the Debian packages (make check needs protoc and the
# headers its packages build against), not the venvs or Hadoop.
set -euo pipefail
debian_only=false
[ "${1:-}" = "--debian-only" ] && debian_only=true
python=${PYTHON:-/usr/bin/python3}

missing=()
# has PYTHON MODULE...: whether PYTHON finds every MODULE. Finding a
# module is enough to say its package is installed and takes milliseconds;
# importing torch or TensorFlow takes seconds, over a minute under load.
has() {
  local py=$1; shift
  "$py" -c 'import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in sys.argv[1:]))' "$@" >/dev/null 2>&1
}
# need PACKAGE CHECK...: install PACKAGE unless CHECK succeeds.
need() {
  local pkg=$1; shift
  "$@" >/dev/null 2>&1 || missing+=("$pkg")
}

need python3-torch has "$python" torch
need python3-numpy has "$python" numpy
need python3-venv has "$python" ensurepip venv
# Headless Chromium drives the web UI's page tests.
need chromium sh -c 'command -v chromium'
# Java and Maven run real Apache Hadoop (HDFS and YARN mini clusters) for
# the YARN tier: scripts/hadoop-minicluster.sh.
need openjdk-17-jdk-headless sh -c 'command -v javac'
need maven sh -c 'command -v mvn'
# MIT Kerberos: a throwaway KDC on loopback for the Kerberos tests.
need krb5-kdc sh -c 'command -v krb5kdc || test -x /usr/sbin/krb5kdc'
need krb5-admin-server sh -c 'command -v kadmin.local || test -x /usr/sbin/kadmin.local'
need krb5-user sh -c 'command -v kinit'
# UCX: the collective's RDMA data link builds against UCX's headers and
# loads libucp at run time; its tests run it over shared memory and TCP (no
# RDMA hardware needed).
need libucx-dev sh -c 'test -f /usr/include/ucp/api/ucp.h'
need ucx-utils sh -c 'command -v ucx_info'
# protoc: make proto regenerates, and make check compares, the generated
# gRPC and protobuf code (scripts/protoc.sh).
need protobuf-compiler sh -c 'command -v protoc'

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
  "$python" -c 'import numpy, torch' || { echo "python3-torch installed but torch does not import with $python" >&2; exit 1; }
fi
$debian_only && exit 0

# Apache Hadoop from Maven Central into ~/.m2, once (about 200 MB); the
# real-Hadoop tests start their cluster from it.
if ! "$(dirname "$0")/hadoop-minicluster.sh" --fetch >"${TMPDIR:-/tmp}/spindle-hadoop-fetch.log" 2>&1; then
  echo "warning: could not fetch Apache Hadoop through Maven (see ${TMPDIR:-/tmp}/spindle-hadoop-fetch.log); the real-Hadoop tests will fail" >&2
fi

# Python packages from PyPI that some tests need, in a venv made from
# $python with --system-site-packages (so Debian's torch and numpy stay
# visible), kept under the user's cache and reused: tensorflow-cpu for the
# TensorFlow parameter-server job, pyarrow for the Python feed's pyarrow
# path (Debian's python3 has no pyarrow). A failed install leaves no venv behind,
# and the tests that need it say they skip; it never fails the build.
venv=${SPINDLE_TEST_VENV:-$HOME/.cache/spindle-test-venv}
tf_spec=tensorflow-cpu==2.21.0
pyarrow_spec=pyarrow==26.0.1
if ! has "$venv/bin/python" tensorflow; then
  echo "installing $tf_spec into $venv (PyPI; about 600 MB, once)..."
  fresh=false
  [ -x "$venv/bin/python" ] || fresh=true
  if { [ -x "$venv/bin/python" ] || "$python" -m venv --system-site-packages "$venv"; } >/dev/null 2>&1 &&
     "$venv/bin/python" -m pip install -q --disable-pip-version-check "$tf_spec" >"${TMPDIR:-/tmp}/spindle-pip.log" 2>&1 &&
     "$venv/bin/python" -c 'import tensorflow' >/dev/null 2>&1; then
    echo "$tf_spec ready in $venv"
  else
    echo "warning: could not install $tf_spec into $venv (see ${TMPDIR:-/tmp}/spindle-pip.log); the TensorFlow tests will skip" >&2
    if $fresh; then rm -rf "$venv"; fi
  fi
fi
if [ -x "$venv/bin/python" ] &&
   ! has "$venv/bin/python" pyarrow; then
  echo "installing $pyarrow_spec into $venv (PyPI, once)..."
  if "$venv/bin/python" -m pip install -q --disable-pip-version-check "$pyarrow_spec" >"${TMPDIR:-/tmp}/spindle-pip.log" 2>&1 &&
     "$venv/bin/python" -c 'import pyarrow' >/dev/null 2>&1; then
    echo "$pyarrow_spec ready in $venv"
  else
    echo "warning: could not install $pyarrow_spec into $venv (see ${TMPDIR:-/tmp}/spindle-pip.log); the pyarrow tests will skip" >&2
  fi
fi

# ONNX Runtime, onnx, scikit-learn, skl2onnx and tf2onnx in the same venv
# (numpy 2): the model export tests load every exported model in the real
# ONNX Runtime. tf2onnx 1.17 asks only protobuf>=3.20, so TensorFlow's
# protobuf stays.
onnx_specs=(onnxruntime==1.23.2 onnx==1.19.1 scikit-learn==1.7.2 skl2onnx==1.19.1 tf2onnx==1.17.0)
if [ -x "$venv/bin/python" ] &&
   ! has "$venv/bin/python" onnxruntime onnx sklearn skl2onnx tf2onnx; then
  echo "installing ${onnx_specs[*]} into $venv (PyPI, once)..."
  if "$venv/bin/python" -m pip install -q --disable-pip-version-check "${onnx_specs[@]}" >"${TMPDIR:-/tmp}/spindle-pip.log" 2>&1 &&
     "$venv/bin/python" -c 'import onnxruntime, onnx, sklearn, skl2onnx, tf2onnx' >/dev/null 2>&1; then
    echo "${onnx_specs[*]} ready in $venv"
  else
    echo "warning: could not install ${onnx_specs[*]} into $venv (see ${TMPDIR:-/tmp}/spindle-pip.log); the ONNX tests will skip" >&2
  fi
fi

# A venv of its own, made from $python without system site packages, with
# numpy and venv-pack: the real-Hadoop tests pack it with venv-pack (about
# 30 MB) and ship it with --archives, as a user ships a Python environment.
packvenv=${SPINDLE_PACK_VENV:-$HOME/.cache/spindle-pack-venv}
pack_specs=(venv-pack==0.2.0 numpy==2.2.6)
if ! [ -x "$packvenv/bin/venv-pack" ] || ! has "$packvenv/bin/python" numpy; then
  echo "installing ${pack_specs[*]} into $packvenv (PyPI, once)..."
  rm -rf "$packvenv"
  if "$python" -m venv "$packvenv" >/dev/null 2>&1 &&
     "$packvenv/bin/python" -m pip install -q --disable-pip-version-check "${pack_specs[@]}" >"${TMPDIR:-/tmp}/spindle-pip.log" 2>&1 &&
     "$packvenv/bin/python" -c 'import numpy' >/dev/null 2>&1; then
    echo "${pack_specs[*]} ready in $packvenv"
  else
    echo "warning: could not install ${pack_specs[*]} into $packvenv (see ${TMPDIR:-/tmp}/spindle-pip.log); the venv-pack test will skip" >&2
    rm -rf "$packvenv"
  fi
fi

# A second venv for the Python API's tests (spindle.run, spindle.spark,
# TensorBoard files) where Debian's torch must run beside them: torch 1.13
# cannot use numpy 2, which tensorflow-cpu brings into the venv above, so
# this one keeps Debian's numpy (1.24) and the packages pinned to work with
# it: pyarrow 25.0.1, pyspark (Java 17 above), cloudpickle, tensorboard.
pyvenv=${SPINDLE_PY_VENV:-$HOME/.cache/spindle-py-venv}
py_specs=(pyspark==4.3.0 pandas==2.2.3 cloudpickle==3.1.2 pyarrow==25.0.1 tensorboard==2.21.0)
if ! has "$pyvenv/bin/python" pyspark pandas cloudpickle pyarrow tensorboard; then
  echo "installing ${py_specs[*]} into $pyvenv (PyPI; about 700 MB, once)..."
  fresh=false
  [ -x "$pyvenv/bin/python" ] || fresh=true
  if { [ -x "$pyvenv/bin/python" ] || "$python" -m venv --system-site-packages "$pyvenv"; } >/dev/null 2>&1 &&
     "$pyvenv/bin/python" -m pip install -q --disable-pip-version-check "${py_specs[@]}" >"${TMPDIR:-/tmp}/spindle-pip.log" 2>&1 &&
     "$pyvenv/bin/python" -c 'import numpy, torch, pyspark, pandas, cloudpickle, pyarrow, tensorboard; torch.from_numpy(numpy.ones(1))' >/dev/null 2>&1; then
    echo "${py_specs[*]} ready in $pyvenv"
  else
    echo "warning: could not install ${py_specs[*]} into $pyvenv (see ${TMPDIR:-/tmp}/spindle-pip.log); the Spark and spindle.run tests will skip" >&2
    if $fresh; then rm -rf "$pyvenv"; fi
  fi
fi

# ONNX Runtime and onnx beside Debian's torch, for spindle.model.save's
# PyTorch tests: the last releases that still run on numpy 1.24.
py_onnx_specs=(onnxruntime==1.19.2 onnx==1.16.2)
if [ -x "$pyvenv/bin/python" ] &&
   ! has "$pyvenv/bin/python" onnxruntime onnx; then
  echo "installing ${py_onnx_specs[*]} into $pyvenv (PyPI, once)..."
  if "$pyvenv/bin/python" -m pip install -q --disable-pip-version-check "${py_onnx_specs[@]}" >"${TMPDIR:-/tmp}/spindle-pip.log" 2>&1 &&
     "$pyvenv/bin/python" -c 'import numpy, torch, onnxruntime, onnx; torch.from_numpy(numpy.ones(1))' >/dev/null 2>&1; then
    echo "${py_onnx_specs[*]} ready in $pyvenv"
  else
    echo "warning: could not install ${py_onnx_specs[*]} into $pyvenv (see ${TMPDIR:-/tmp}/spindle-pip.log); the PyTorch ONNX tests will skip" >&2
  fi
fi
