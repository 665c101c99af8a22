#!/usr/bin/env python3
"""A Spark DataFrame fed to a 2-rank job: pushed from the Spark tasks vs written to Parquet first and read by Spindle.

The DataFrame (16 float32 features and a label) is computed by Spark, not
read from a file. Three runs on one warm Spark session (a first small job
has started the JVM's Python workers, as in a notebook):

- Spark alone: the same DataFrame through mapInArrow into a function that
  only counts the rows. This is the fastest any consumer of Spark's Arrow
  batches can get them, and the bound for pushing.
- Pushed: spindle.spark.train. It prints the rows per second reaching the
  training processes (rows over the span from the first batch on any rank
  to the last), when the first batch reached a rank after the first Spark
  task started, and the whole run's time.
- Parquet: df.write.parquet, then spindle.run reading the files (the path
  Petastorm's make_spark_converter takes: materialise first, then read).

Run with $SPINDLE_PY_VENV's python (pyspark, cloudpickle) and Java.
"""

import argparse
import os
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "python"))
import spindle  # noqa: E402
import spindle.spark  # noqa: E402


def read_feed():
    """On each rank: rows read, and when the first and the last batch arrived."""
    import time

    import spindle
    rows, first, last = 0, None, None
    for ep in spindle.epochs("tensors"):
        for x, _ in ep:
            now = time.time()
            first = first or now
            last = now
            rows += len(x)
    return rows, first, last


def count_rows(batches):
    """A mapInArrow function that only counts the rows and times the first and the last batch."""
    import time

    import pyarrow as pa
    n, first, last = 0, None, None
    for b in batches:
        last = time.time()
        first = first or last
        n += b.num_rows
    yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64()), pa.array([first or 0.0]), pa.array([last or 0.0])],
                                     names=["rows", "first", "last"])


def stamp_task_starts(path):
    """Have every pushing Spark task append when it started to path (the library's function, unchanged, runs inside)."""
    pusher = spindle.spark._partition_pusher

    def stamped(*args):
        push_partition = pusher(*args)

        def run(batches):
            import time
            with open(path, "a") as f:
                f.write(f"{time.time()}\n")
            yield from push_partition(batches)
        return run
    spindle.spark._partition_pusher = stamped


def first_task(path):
    with open(path) as f:
        return min(float(line) for line in f)


def report(name, start, ranks, end, task=None):
    rows = sum(r[0] for r in ranks)
    first = min(r[1] for r in ranks)
    last = max(r[2] for r in ranks)
    rate = rows / max(last - first, 1e-9)
    after = f", {first - task:.2f} s after the first Spark task started" if task else ""
    print(f"  {name}: {rows} rows, {rate / 1e6:.2f}M rows/s reaching the ranks, first batch {first - start:.2f} s "
          f"after the call{after}, whole run {end - start:.2f} s")
    return rate, end - start


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    a = ap.parse_args()
    here = os.path.dirname(os.path.abspath(__file__))
    os.environ["PYTHONPATH"] = os.path.join(here, "..", "python")
    os.environ["PYSPARK_PYTHON"] = sys.executable
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").appName("spindle-bench")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cols = [f"cast(rand({i}) as float) as f{i}" for i in range(16)] + ["cast(id % 2 as float) as label"]
    df = spark.range(a.rows, numPartitions=a.partitions).selectExpr(*cols)
    # A notebook's session is warm: its JVM has run a stage and its
    # Python workers have imported pyarrow.
    schema = "rows long, first double, last double"
    start = time.time()
    spark.range(1000, numPartitions=2).selectExpr(*cols).mapInArrow(count_rows, schema).collect()
    print(f"  Spark's first job in a new session (not timed below): {time.time() - start:.2f} s")

    got = df.mapInArrow(count_rows, schema).collect()
    spark_rate = a.rows / (max(r["last"] for r in got) - min(r["first"] for r in got))
    print(f"  Spark alone (mapInArrow into a function that only counts): {spark_rate / 1e6:.2f}M rows/s "
          "from its first batch to its last")

    opts = dict(num_workers=2, label="label", feed="tensor", batch_rows=8192, stream=False, all_ranks=True)
    tmp = tempfile.mkdtemp(prefix="spindle-bench-")
    try:
        stamps = os.path.join(tmp, "task-starts")
        stamp_task_starts(stamps)
        start = time.time()
        ranks = spindle.spark.train(df, read_feed, **opts)
        end = time.time()
        push_rate, push_total = report("pushed from Spark tasks", start, ranks, end, first_task(stamps))

        start = time.time()
        df.write.parquet(os.path.join(tmp, "df"))
        written = time.time()
        ranks = spindle.run(read_feed, num_workers=2, input=os.path.join(tmp, "df", "*.parquet"),
                            label_column="label", feed="tensor", batch_rows=8192, stream=False, all_ranks=True)
        end = time.time()
        print(f"  Parquet first: writing took {written - start:.2f} s")
        pq_rate, _ = report("Parquet read by Spindle (rate of the read alone)", written, ranks, end)
        pq_total = end - start
        print(f"  Parquet path whole run (write + read): {pq_total:.2f} s")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"  push rows/s = {push_rate / pq_rate:.2f}x Parquet's, {push_rate / spark_rate:.2f}x Spark alone's; "
          f"push whole run = {pq_total / push_total:.2f}x faster than write-then-read")
    spark.stop()


if __name__ == "__main__":
    main()
