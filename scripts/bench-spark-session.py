#!/usr/bin/env python3
"""A Spark DataFrame into a warm session's job vs into a new job: time from train() to the first batch on a rank.

On one warm Spark session (a first small job has started its Python
workers, as in a notebook) and one spindle.Session of 2 local ranks with
pushed input and torch preloaded, one untimed session job first (Spark's
first run of the DataFrame's plan is slower: 26 s against 0.6-1.8 s
after it, here), each round runs both, the first going first in odd
rounds and second in even ones:

- session: spindle.spark.train(df, fn, session=s), the session's next
  job, fn forked from the warm ranks;
- new job: spindle.spark.train(df, fn, num_workers=2, ...), a job of
  its own whose ranks start and import torch.

fn imports torch, as a PyTorch training function does, and reads every
epoch; the figure is the time from the train() call to the first batch
reaching any rank (one clock: Spark, Spindle and the ranks all run on
this host), and the whole call's. --runs rounds (default 3); medians are
compared, with the load average beside them.

Run with $SPINDLE_PY_VENV's python (pyspark, cloudpickle, torch) and Java.
"""

import os
import statistics
import time

import bench_spark
import spindle
import spindle.spark


def first_batch():
    """On each rank: torch imported, every epoch read; when the first batch arrived, and the rows."""
    import time

    import torch  # noqa: F401 - what a PyTorch training function imports first

    import spindle
    first, rows = None, 0
    for ep in spindle.epochs("tensors"):
        for x, _ in ep:
            first = first or time.time()
            rows += len(x)
    return first, rows


def timed(train):
    """Run train(); return seconds to the first batch on any rank, and to the call's end."""
    start = time.time()
    ranks = train()
    end = time.time()
    firsts = [f for f, _ in ranks if f]
    return min(firsts) - start, end - start, sum(n for _, n in ranks)


def main():
    a = bench_spark.parse_args(__doc__)
    bench_spark.worker_env()
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("spindle-bench-session")
             .config("spark.ui.enabled", "false").getOrCreate())
    spark.range(1000, numPartitions=2).selectExpr("id").toPandas()  # Spark's Python workers started
    df = bench_spark.frame(spark, a.rows, a.partitions)
    schema = spindle.spark.push_schema(df.schema)
    with spindle.Session(num_executors=2, preload=["torch"], input="flight-put:", label_column="label", epochs=1,
                         conf={"spindle.flight.put.schema": schema}, stream=False) as s:
        kinds = {
            "session": lambda: spindle.spark.train(df, first_batch, session=s, all_ranks=True),
            "new job": lambda: spindle.spark.train(df, first_batch, num_workers=2, label="label", epochs=1,
                                                   all_ranks=True, stream=False),
        }
        got = {k: [] for k in kinds}
        loads = []
        timed(kinds["session"])  # warms Spark up for the DataFrame's plan
        for i in range(a.runs):
            order = list(kinds.items())
            for kind, train in order if i % 2 == 0 else order[::-1]:
                loads.append(os.getloadavg()[0])
                first, whole, rows = timed(train)
                if rows != a.rows:
                    raise SystemExit(f"{kind}: {rows} rows reached the ranks, want {a.rows}")
                got[kind].append((first, whole))
                print(f"  round {i + 1} {kind}: first batch {first:.2f} s after train(), whole call {whole:.2f} s")
    spark.stop()
    med = {k: (statistics.median(f for f, _ in v), statistics.median(w for _, w in v)) for k, v in got.items()}
    print(f"  {a.rows} rows, {a.partitions} partitions, 2 ranks, load average {min(loads):.0f}-{max(loads):.0f}, "
          f"medians of {a.runs}:")
    for kind, (first, whole) in med.items():
        print(f"  {kind}: first batch {first:.2f} s after train(), whole call {whole:.2f} s")
    print(f"  session/new job: first batch {med['session'][0] / med['new job'][0]:.2f}x, "
          f"whole call {med['session'][1] / med['new job'][1]:.2f}x")


if __name__ == "__main__":
    main()
