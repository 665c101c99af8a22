#!/usr/bin/env python3
"""spindle.run of a trivial function vs spindle submit of the same code as a script and vs TorchDistributor.run, 2 local workers.

Runs the three in turn, --runs rounds (interleaved, so load moves them
alike), and prints each one's median wall time and their ratios.
TorchDistributor (pyspark.ml.torch, local_mode on a local[2] Spark
session, CPU) runs when pyspark and torch import; its Spark session's
start is not timed. Debian's torch 1.13 on Python 3.11 has a torchrun
that fails on its own default --redirects/--tee of "0" (Python 3.11's
IntFlag no longer lists a zero member, so torch's Std.from_str("0")
returns None); TorchDistributor runs torchrun with those defaults, so
here torchrun is given PET_REDIRECTS=1 and PET_TEE=1 (its environment
form of the flags: each rank's stdout also goes to a log file, still
shown on the console), which parse. Run with an interpreter that has
cloudpickle (make deps's $SPINDLE_PY_VENV) and SPINDLE_BINARY or spindle
on PATH.
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


def timed(fn):
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    a = ap.parse_args()
    td = TorchDistributorRun()
    got = {"submit": [], "run": [], "td": []}
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "trivial.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        argv = [_submit.binary(), "submit", "--master", "local[2]", "--log-level", "warn", "--", sys.executable, script]
        for _ in range(a.runs):
            got["submit"].append(timed(lambda: subprocess.run(argv, check=True, capture_output=True)))
            got["run"].append(timed(lambda: spindle.run(trivial, num_workers=2, stream=False)))
            if td.ready:
                got["td"].append(timed(td.run))
    td.close()
    submit, run = statistics.median(got["submit"]), statistics.median(got["run"])
    load = os.getloadavg()[0]
    print(f"  spindle submit of a script, 2 local ranks: {submit:.2f} s (median of {a.runs}, interleaved, "
          f"load average {load:.0f})")
    print(f"  spindle.run(fn), 2 local ranks:            {run:.2f} s, {run / submit:.2f}x of submit")
    if got["td"]:
        t = statistics.median(got["td"])
        print(f"  TorchDistributor.run(fn), 2 local processes: {t:.2f} s; spindle.run took {run / t:.2f}x of it, "
              f"spindle submit {submit / t:.2f}x")


class TorchDistributorRun:
    """TorchDistributor(num_processes=2, local_mode=True).run(trivial_torch) on a Spark session started once."""

    def __init__(self):
        self.ready, self.spark = False, None
        try:
            import torch  # noqa: F401
            from pyspark.ml.torch.distributor import TorchDistributor
            from pyspark.sql import SparkSession
        except ImportError as e:
            print(f"  TorchDistributor skipped: {e}")
            return
        os.environ["PYSPARK_PYTHON"] = sys.executable
        os.environ.setdefault("PET_REDIRECTS", "1")
        os.environ.setdefault("PET_TEE", "1")
        self.spark = (SparkSession.builder.master("local[2]").appName("spindle-bench-td")
                      .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false").getOrCreate())
        self.spark.sparkContext.setLogLevel("ERROR")
        self.dist = TorchDistributor(num_processes=2, local_mode=True, use_gpu=False)
        try:
            self.run()  # not timed: Spark's first job, and whether it runs here at all
            self.ready = True
        except Exception as e:  # noqa: BLE001 - a baseline that cannot run here is reported, not fatal
            import torch
            msg = str(e).splitlines()[-1] if str(e) else type(e).__name__
            print(f"  TorchDistributor failed with this torch ({torch.__version__}): {msg}")

    def run(self):
        self.dist.run(trivial_torch)

    def close(self):
        if self.spark:
            self.spark.stop()


def trivial_torch():
    import os
    return int(os.environ["RANK"]) * 2


if __name__ == "__main__":
    main()
