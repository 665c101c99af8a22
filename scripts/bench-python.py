#!/usr/bin/env python3
"""spindle.run of a trivial function vs spindle submit of the same code as a script, 2 local workers.

Prints the median wall time of each over --runs runs, measured in this
run, and their ratio. Run with an interpreter that has cloudpickle
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


if __name__ == "__main__":
    main()
