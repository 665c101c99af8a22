#!/usr/bin/env python3
"""spindle.run of a trivial function vs spindle submit of the same code as a script and vs TorchDistributor.run, 2 local workers.

Prints the median wall time of each over --runs runs, measured in this
run, and their ratios. TorchDistributor (pyspark.ml.torch, local_mode on
a local[2] Spark session, CPU) runs when pyspark and torch import; its
Spark session's start is not timed. Run with an interpreter that has cloudpickle
(make deps's $SPINDLE_PY_VENV) and SPINDLE_BINARY or spindle on PATH.
"""

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import spindle  # noqa: E402
from spindle import _submit  # noqa: E402

SCRIPT = "import spindle\nprint(spindle.rank() * 2)\n"


def trivial():
    import spindle
    return spindle.rank() * 2


def timed(fn, runs):
    times = []
    for _ in range(runs):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "trivial.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        argv = [_submit.binary(), "submit", "--master", "local[2]", "--log-level", "warn", "--", sys.executable, script]
        submit = timed(lambda: subprocess.run(argv, check=True, capture_output=True), a.runs)
    run = timed(lambda: spindle.run(trivial, num_workers=2, stream=False), a.runs)
    print(f"  spindle submit of a script, 2 local ranks: {submit:.2f} s (median of {a.runs})")
    print(f"  spindle.run(fn), 2 local ranks:            {run:.2f} s, {run / submit:.2f}x of submit")
    td = torch_distributor(a.runs)
    if td:
        print(f"  TorchDistributor.run(fn), 2 local processes: {td:.2f} s; spindle.run took {run / td:.2f}x of it")


def torch_distributor(runs):
    """The median time of TorchDistributor(num_processes=2, local_mode=True).run(trivial_torch), or None without pyspark and torch."""
    try:
        import torch  # noqa: F401
        from pyspark.ml.torch.distributor import TorchDistributor
        from pyspark.sql import SparkSession
    except ImportError as e:
        print(f"  TorchDistributor skipped: {e}")
        return None
    os.environ["PYSPARK_PYTHON"] = sys.executable
    spark = (SparkSession.builder.master("local[2]").appName("spindle-bench-td").config("spark.ui.enabled", "false")
             .config("spark.ui.showConsoleProgress", "false").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        dist = TorchDistributor(num_processes=2, local_mode=True, use_gpu=False)
        return timed(lambda: dist.run(trivial_torch), runs)
    except Exception as e:  # noqa: BLE001 - a baseline that cannot run here is reported, not fatal
        import torch
        print(f"  TorchDistributor failed with this torch ({torch.__version__}): {str(e).splitlines()[-1] if str(e) else type(e).__name__}")
        return None
    finally:
        spark.stop()


def trivial_torch():
    import os
    return int(os.environ["RANK"]) * 2


if __name__ == "__main__":
    main()
