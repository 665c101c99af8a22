#!/usr/bin/env bash
# Installs what only make bench's baselines use, when missing (make
# bench-deps; make test never runs it). Idempotent and quiet when present;
# a failed install warns and the bench skips that baseline, saying so.
set -euo pipefail
python=${PYTHON:-/usr/bin/python3}
log=${TMPDIR:-/tmp}/spindle-bench-pip.log

# install VENV CHECK SPECS...: pip-install SPECS into VENV (made from
# $python with --system-site-packages when missing) unless the Python
# CHECK already succeeds there; CHECK must succeed afterwards.
install() {
  local v=$1 check=$2; shift 2
  "$v/bin/python" -c "$check" >/dev/null 2>&1 && return 0
  echo "installing $* into $v (PyPI, once)..."
  local fresh=false
  [ -x "$v/bin/python" ] || fresh=true
  if { [ -x "$v/bin/python" ] || "$python" -m venv --system-site-packages "$v"; } >/dev/null 2>&1 &&
     "$v/bin/python" -m pip install -q --disable-pip-version-check -c <(echo "numpy==$numpy") "$@" >"$log" 2>&1 &&
     "$v/bin/python" -c "$check" >/dev/null 2>&1; then
    echo "$* ready in $v"
  else
    echo "warning: could not install $* into $v (see $log); make bench skips that baseline" >&2
    if $fresh; then rm -rf "$v"; fi
  fi
}

# Petastorm's make_spark_converter (scripts/bench_petastorm.py): petastorm
# 0.13.1 imports pyarrow.filesystem and the legacy ParquetDataset, which
# pyarrow 25 no longer has (14.0.2 does), while pyspark 4 wants pyarrow 18
# or later; so a venv of its own with pyspark 3.5.3 and pyarrow 14.0.2 beside
# Debian's torch 1.13 and numpy, which the constraint keeps (torch 1.13
# cannot use numpy 2).
numpy=$("$python" -c 'import numpy; print(numpy.__version__)')
basevenv=${SPINDLE_BASELINE_VENV:-$HOME/.cache/spindle-baseline-venv}
install "$basevenv" "import numpy, torch, pyspark, pyarrow.filesystem; from petastorm.spark import make_spark_converter; torch.from_numpy(numpy.ones(1))" \
  pyspark==3.5.3 pyarrow==14.0.2 petastorm==0.13.1 pandas==2.2.3 dill==0.4.1 diskcache==5.6.3 fsspec==2026.9.0

# TensorFlowOnSpark's InputMode.SPARK (scripts/bench-spark-tfos.py) with
# pyspark in the test venv, the one that has TensorFlow (make deps).
venv=${SPINDLE_TEST_VENV:-$HOME/.cache/spindle-test-venv}
if [ -x "$venv/bin/python" ]; then
  numpy=$("$venv/bin/python" -c 'import numpy; print(numpy.__version__)' 2>/dev/null || echo 0)
  install "$venv" "import importlib.util as u, sys; sys.exit(any(u.find_spec(m) is None for m in ('tensorflowonspark', 'pyspark', 'pandas')))" \
    tensorflowonspark==2.2.5 pyspark==4.3.0 pandas==2.2.3
fi
