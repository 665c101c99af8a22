#!/usr/bin/env python3
"""A Spark DataFrame fed to a 2-rank job: pushed from the Spark tasks vs written to Parquet first and read by Spindle.

The DataFrame (16 float32 features and a label) is computed by Spark, not
read from a file. Pushed: spindle.spark.train. Parquet: df.write.parquet,
then spindle.run reading the files (the path Petastorm's
make_spark_converter takes: materialise first, then read). For each it
prints the rows per second reaching the training processes (rows over
the span from the first batch on any rank to the last), the time from the
call to the first batch, and the whole run's time. Run with
$SPINDLE_PY_VENV's python (pyspark, cloudpickle) and Java.
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


def report(name, start, ranks, end):
    rows = sum(r[0] for r in ranks)
    first = min(r[1] for r in ranks)
    last = max(r[2] for r in ranks)
    rate = rows / max(last - first, 1e-9)
    print(f"  {name}: {rows} rows, {rate / 1e6:.2f}M rows/s reaching the ranks, first batch {first - start:.2f} s "
          f"after the call, whole run {end - start:.2f} s")
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
             .config("spark.ui.enabled", "false").config("spark.driver.memory", "2g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    cols = [f"cast(rand({i}) as float) as f{i}" for i in range(16)] + ["cast(id % 2 as float) as label"]
    df = spark.range(a.rows, numPartitions=a.partitions).selectExpr(*cols)
    opts = dict(num_workers=2, label="label", feed="tensor", batch_rows=8192, stream=False, all_ranks=True)

    start = time.time()
    ranks = spindle.spark.train(df, read_feed, **opts)
    push_rate, push_total = report("pushed from Spark tasks", start, ranks, time.time())

    tmp = tempfile.mkdtemp(prefix="spindle-bench-")
    try:
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
    print(f"  push rows/s = {push_rate / pq_rate:.2f}x Parquet's; push whole run = {pq_total / push_total:.2f}x faster than write-then-read")
    spark.stop()


if __name__ == "__main__":
    main()
