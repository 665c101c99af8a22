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
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import spindle  # noqa: E402
from spindle import _submit  # noqa: E402

SCRIPT = "import time\nimport torch\nprint('running', time.time())\n"


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
        cli = cli_running(n, a.runs)
        fresh = all_running(lambda: spindle.run(started, num_workers=n, all_ranks=True, stream=False), max(1, a.runs // 2))
        print(f"  {n} ranks: session jobs after the first had every rank running with torch imported {sess:.3f} s after the call "
              f"(session start, importing torch once: {warm:.1f} s); spindle submit --session: {cli:.3f} s; "
              f"a new job each time: {fresh:.2f} s ({fresh / sess:.0f}x)")


def cli_running(n, runs):
    """The same through the command line: spindle session start, then spindle submit --session ID -- python3 SCRIPT."""
    spindle_bin = _submit.binary()
    with tempfile.TemporaryDirectory() as d:
        env = dict(os.environ, SPINDLE_SESSIONS_DIR=os.path.join(d, "reg"))
        env.pop("PYTHONPATH", None)
        script = os.path.join(d, "t.py")
        with open(script, "w") as f:
            f.write(SCRIPT)
        py = ["--python", sys.executable]
        sid = subprocess.run([spindle_bin, "session", "start", *py, "--num-executors", str(n), "--preload", "torch"],
                             env=env, check=True, capture_output=True, text=True).stdout.strip()
        try:
            def one():
                out = subprocess.run([spindle_bin, "submit", "--session", sid, "--", "python3", script], env=env,
                                     check=True, capture_output=True, text=True).stdout
                return [(None, float(line.split()[-1])) for line in out.splitlines() if "running" in line]
            one()
            return all_running(one, runs)
        finally:
            subprocess.run([spindle_bin, "session", "stop", *py, sid], env=env, capture_output=True)


if __name__ == "__main__":
    main()
