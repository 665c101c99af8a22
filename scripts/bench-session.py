#!/usr/bin/env python3
"""Many short PyTorch jobs: a spindle.Session's second and later jobs vs a new job each time, 2 and 8 local ranks.

For each size it prints, for the session's jobs after the first and for
spindle.run jobs started afresh, the time from the call until every rank
was running the job's function with torch imported (the median over
--runs jobs), and the session's start (its ranks importing torch once).
Run with an interpreter that has torch and cloudpickle (make deps's
$SPINDLE_PY_VENV) and SPINDLE_BINARY or spindle on PATH.
"""

import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import spindle  # noqa: E402


def started():
    """The job's function: torch is imported (already, in a session), then the time it started."""
    import time
    t = time.time()
    import torch  # noqa: F401
    return t, time.time()


def all_running(call, runs):
    """The median, over runs, of the time from the call until every rank had torch imported."""
    spans = []
    for _ in range(runs):
        t0 = time.time()
        ranks = call()
        spans.append(max(r[1] for r in ranks) - t0)
    return statistics.median(spans)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--sizes", default="2,8")
    a = ap.parse_args()
    for n in (int(x) for x in a.sizes.split(",")):
        t0 = time.time()
        with spindle.Session(num_executors=n, preload=["torch"], stream=False) as s:
            warm = time.time() - t0
            s.run(started, all_ranks=True)  # the first job
            sess = all_running(lambda: s.run(started, all_ranks=True), a.runs)
        fresh = all_running(lambda: spindle.run(started, num_workers=n, all_ranks=True, stream=False), max(1, a.runs // 2))
        print(f"  {n} ranks: session jobs after the first had every rank running with torch imported {sess:.3f} s after the call "
              f"(session start, importing torch once: {warm:.1f} s); a new job each time: {fresh:.2f} s ({fresh / sess:.0f}x)")


if __name__ == "__main__":
    main()
