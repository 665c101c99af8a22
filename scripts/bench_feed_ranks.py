"""Benchmark of the arrow feed in a whole job: one rank against two, built-in reader against pyarrow.

Each trial is a `spindle submit` of a local job whose executors decode a
Parquet file (16 float32 features and an int64 label) and feed it with
--feed arrow to a training process that reads (features, labels) numpy
batches with spindle.Feed, the built-in reader or use_pyarrow=True. Every
rank reports, for each of two epochs, its rows per second from its first
batch to its last (the job's start and the interpreter's imports are not
counted). Every rank reads the same rows (two ranks read two copies of
the file), so its share and what its executor's cache keeps for the
second epoch are the same whatever the ranks; two ranks' per-rank rate is
set beside one rank's, which on a machine with a core per rank and per
executor would be the same.

Trials run interleaved, medians over the rounds. Run it with an interpreter
that has pyarrow and numpy, SPINDLE_BINARY or spindle on PATH:

    python3 scripts/bench_feed_ranks.py [rows per rank] [rounds]
"""

import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile

PYTHON_DIR = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python")
BATCH = 16384
TRIALS = [(1, False), (2, False), (1, True), (2, True)]  # (ranks, use_pyarrow)

TRAIN = r"""
import os, sys, time
import spindle
use = sys.argv[1] == "pyarrow"
feed = spindle.Feed(use_pyarrow=use, label_column="label")
for epoch in feed.epochs("tensors"):
    rows, t0 = 0, None
    for x, y in epoch:
        if t0 is None:
            t0, first = time.perf_counter(), len(y)
        rows += len(y)
    seconds = time.perf_counter() - t0
    # The first batch's rows are not timed: the clock starts once it is in.
    print(f"benchrank rank={os.environ['SPINDLE_RANK']} epoch={epoch.epoch} rows={rows} "
          f"rate={(rows - first) / seconds:.0f}", flush=True)
"""

LINE = re.compile(r"benchrank rank=(\d+) epoch=(\d+) rows=(\d+) rate=(\d+)")


def write_data(path, rows):
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq

    rng = np.random.default_rng(1)
    cols = {f"f{i}": rng.random(rows, dtype=np.float32) for i in range(16)}
    cols["label"] = rng.integers(0, 2, rows).astype(np.int64)
    pq.write_table(pa.table(cols), path, row_group_size=1 << 18)


def trial(binary, d, ranks, use_pyarrow, rows):
    """Run one job; return {epoch: median per-rank rows/s}."""
    env = dict(os.environ, PYTHONPATH=PYTHON_DIR)
    env.pop("SPINDLE_PYARROW", None)
    cmd = [binary, "submit", "--master", f"local[{ranks}]", "--num-executors", str(ranks),
           "--input", os.path.join(d, f"ranks{ranks}", "*.parquet"), "--feed", "arrow", "--label-column", "label",
           "--batch-rows", str(BATCH), "--epochs", "2", "--conf", "spindle.log.level=warn",
           "--", sys.executable, os.path.join(d, "train.py"), "pyarrow" if use_pyarrow else "builtin"]
    out = subprocess.run(cmd, capture_output=True, text=True, env=env, check=False)
    if out.returncode != 0:
        sys.exit(f"bench_feed_ranks: {ranks} ranks failed:\n{out.stdout}\n{out.stderr}")
    rates = {}
    seen = 0
    for m in LINE.finditer(out.stdout):
        seen += int(m.group(3))
        rates.setdefault(int(m.group(2)), []).append(int(m.group(4)))
    if seen != 2 * rows * ranks:
        sys.exit(f"bench_feed_ranks: {ranks} ranks fed {seen} rows over 2 epochs, want {2 * rows * ranks}:\n{out.stdout}")
    return {e: statistics.median(r) for e, r in rates.items()}


def main():
    rows = int(sys.argv[1]) if len(sys.argv) > 1 else 1 << 21
    rounds = int(sys.argv[2]) if len(sys.argv) > 2 else 3
    binary = os.environ.get("SPINDLE_BINARY") or shutil.which("spindle")
    if not binary:
        sys.exit("bench_feed_ranks: set SPINDLE_BINARY or put spindle on PATH")
    with tempfile.TemporaryDirectory(prefix="sbr", dir="/tmp") as d:
        data = os.path.join(d, "data.parquet")
        write_data(data, rows)
        for ranks in {t[0] for t in TRIALS}:
            os.mkdir(os.path.join(d, f"ranks{ranks}"))
            for i in range(ranks):
                os.link(data, os.path.join(d, f"ranks{ranks}", f"part-{i}.parquet"))
        with open(os.path.join(d, "train.py"), "w") as f:
            f.write(TRAIN)
        runs = {t: [] for t in TRIALS}
        for _ in range(rounds):
            for t in TRIALS:
                runs[t].append(trial(binary, d, t[0], t[1], rows))
    load = os.getloadavg()[0]
    print(f"{rows} rows per rank, batch {BATCH}, --feed arrow, median of {rounds} interleaved rounds "
          f"(per-rank rows/s, first batch untimed); load average {load:.1f} on {os.cpu_count()} cores")
    for use in (False, True):
        reader = "Feed(use_pyarrow=True)" if use else "Feed() built-in reader"
        for epoch in (0, 1):
            one = statistics.median(r[epoch] for r in runs[(1, use)])
            two = statistics.median(r[epoch] for r in runs[(2, use)])
            print(f"  {reader:24s} epoch {epoch}: 1 rank {one / 1e6:5.1f}M  2 ranks {two / 1e6:5.1f}M per rank "
                  f"({two / one:4.2f}x)")
    for epoch in (0, 1):
        b = statistics.median(r[epoch] for r in runs[(1, False)])
        p = statistics.median(r[epoch] for r in runs[(1, True)])
        print(f"  epoch {epoch}, 1 rank: pyarrow {p / b:4.2f}x the built-in reader")


if __name__ == "__main__":
    main()
