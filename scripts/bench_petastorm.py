#!/usr/bin/env python3
"""Petastorm's make_spark_converter path, timed on request: the baseline bench-spark-push.py runs beside its own figures.

Runs in the baseline venv (make bench-deps: pyspark 3.5, pyarrow 14,
petastorm 0.13.1 beside Debian's torch), since petastorm does not import
beside the pyarrow that pyspark 4 needs. It builds the benches' DataFrame
on a Spark local[2] session of its own, warms it up, prints "ready", then
answers one command a line on stdin with one line "BENCH {json}":

- noop: the DataFrame written to Spark's noop sink (Spark alone, this
  Spark), {"noop": seconds}.
- petastorm: make_spark_converter(df) (Spark writes the DataFrame to
  Parquet under the converter's cache directory and counts it), then 2
  PyTorch processes (multiprocessing, spawn: each imports torch and
  petastorm) read one shard each through converter.make_torch_dataloader
  for one epoch; {"write", "read", "total": seconds, "rows_by_rank": rows
  each rank read}.
  The converter is deleted afterwards, so each round writes afresh.
- quit.
"""

import json
import multiprocessing
import shutil
import sys
import tempfile
import time

import bench_spark


def read_shard(converter, shard, shards, batch_rows, out):
    """A PyTorch rank: reads its shard of the converted DataFrame for one epoch and reports its shard and row count."""
    import torch  # noqa: F401 - a PyTorch rank, as a training process would be

    rows = 0
    with converter.make_torch_dataloader(batch_size=batch_rows, num_epochs=1, cur_shard=shard,
                                         shard_count=shards) as loader:
        for batch in loader:
            rows += len(batch["label"])
    out.put((shard, rows))


def petastorm_round(df, batch_rows):
    """One make_spark_converter run read by 2 ranks, timed."""
    from petastorm.spark import make_spark_converter

    start = time.time()
    converter = make_spark_converter(df)
    written = time.time()
    ctx = multiprocessing.get_context("spawn")
    out = ctx.Queue()
    ranks = [ctx.Process(target=read_shard, args=(converter, r, 2, batch_rows, out)) for r in range(2)]
    for p in ranks:
        p.start()
    by_rank = dict(out.get() for _ in ranks)
    for p in ranks:
        p.join()
    end = time.time()
    converter.delete()
    if any(p.exitcode != 0 for p in ranks):
        raise RuntimeError(f"a petastorm rank exited with {[p.exitcode for p in ranks]}")
    return {"write": written - start, "read": end - written, "total": end - start,
            "rows_by_rank": [by_rank[r] for r in range(len(ranks))]}


def answer(cmd, df, batch_rows):
    if cmd == "noop":
        start = time.time()
        df.write.format("noop").mode("overwrite").save()
        return {"noop": time.time() - start}
    if cmd == "petastorm":
        return petastorm_round(df, batch_rows)
    raise ValueError(f"unknown command {cmd!r}: want noop, petastorm or quit")


def main():
    a = bench_spark.parse_args(__doc__)
    bench_spark.worker_env()
    from pyspark.sql import SparkSession
    from petastorm.spark import SparkDatasetConverter

    cache = tempfile.mkdtemp(prefix="spindle-bench-petastorm-")
    spark = (SparkSession.builder.master("local[2]").appName("spindle-bench-petastorm")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "2g")
             .config(SparkDatasetConverter.PARENT_CACHE_DIR_URL_CONF, "file://" + cache).getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    df = bench_spark.frame(spark, a.rows, a.partitions)
    bench_spark.frame(spark, 1000, 2).write.format("noop").mode("overwrite").save()
    print("ready", flush=True)
    try:
        for line in sys.stdin:
            cmd = line.strip()
            if cmd == "quit":
                break
            print("BENCH " + json.dumps(answer(cmd, df, 8192)), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(cache, ignore_errors=True)


if __name__ == "__main__":
    main()
