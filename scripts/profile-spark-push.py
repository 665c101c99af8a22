#!/usr/bin/env python3
"""Where a pushing Spark task's Python worker spends its time: waiting for Spark's Arrow batches, or pushing them.

spindle.spark.train feeds a computed DataFrame (bench_spark's: 16 float32
features and a label) to 2 ranks that count the rows, with each Spark
task's pushing function wrapped: the time spent in next() on Spark's
batch iterator (Spark computing the rows, converting them to Arrow in the
JVM and pyspark decoding them) is measured apart from the task's whole
time, whose rest is Spindle's (the cast to the job's schema and the
DoPut writes, held by the job's flow control while the ranks start). The
last task's cProfile (by own time) is printed too.

    profile-spark-push.py [--rows N] [--partitions N] [--max-records-per-batch N]

Run with $SPINDLE_PY_VENV's python (pyspark, cloudpickle) and Java.
"""

import argparse
import glob
import json
import os
import tempfile
import time

import bench_spark
import spindle.spark

REAL_PUSHER = spindle.spark._partition_pusher


def profiled(out):
    """A partition pusher that runs the real one under cProfile, timing the waits for Spark's batches; results go to out."""

    def pusher(*args):
        real = REAL_PUSHER(*args)

        def run(batches):
            import cProfile
            import io
            import json
            import os
            import pstats
            import time

            from pyspark import TaskContext
            waited = [0.0, 0]

            def timed():
                it = iter(batches)
                while True:
                    t = time.perf_counter()
                    b = next(it, None)
                    waited[0] += time.perf_counter() - t
                    if b is None:
                        return
                    waited[1] += 1
                    yield b

            start = time.perf_counter()
            prof = cProfile.Profile()
            prof.enable()
            res = list(real(timed()))
            prof.disable()
            total = time.perf_counter() - start
            text = io.StringIO()
            pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(8)
            with open(os.path.join(out, f"part-{TaskContext.get().partitionId()}.json"), "w") as f:
                json.dump({"total": total, "wait": waited[0], "batches": waited[1], "profile": text.getvalue()}, f)
            yield from res

        return run

    return pusher


def count_rows():
    """On each rank: the rows its feed gave."""
    import spindle
    return sum(len(x) for x, _ in spindle.tensors())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=4)
    ap.add_argument("--max-records-per-batch", type=int, default=10_000)
    a = ap.parse_args()
    bench_spark.worker_env()
    from pyspark.sql import SparkSession
    spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
             .config("spark.sql.execution.arrow.maxRecordsPerBatch", str(a.max_records_per_batch)).getOrCreate())
    out = tempfile.mkdtemp(prefix="spark-push-profile-")
    try:
        # Start the Python workers first, as in a notebook's warm session.
        spark.range(1000, numPartitions=2).mapInArrow(lambda it: it, "id long").count()
        spindle.spark._partition_pusher = profiled(out)
        start = time.time()
        rows = spindle.spark.train(bench_spark.frame(spark, a.rows, a.partitions), count_rows, num_workers=2,
                                   label="label", all_ranks=True, stream=False, via="python")
        print(f"{sum(rows)} rows in {time.time() - start:.1f} s (load average {os.getloadavg()[0]:.0f})")
        profile = ""
        for name in sorted(glob.glob(os.path.join(out, "part-*.json"))):
            with open(name) as f:
                p = json.load(f)
            print(f"  {os.path.basename(name)[:-5]}: {p['total']:.2f} s, waiting for Spark's batches {p['wait']:.2f} s "
                  f"({100 * p['wait'] / p['total']:.0f}%), {p['batches']} batches")
            profile = p["profile"]
        print(profile)
    finally:
        spindle.spark._partition_pusher = REAL_PUSHER
        spark.stop()


if __name__ == "__main__":
    main()
