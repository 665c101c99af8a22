"""What the Spark DataFrame benches share: their flags, the environment Spark's workers need, and the DataFrame."""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "python"))


def parse_args(doc):
    """The benches' flags: --rows, --partitions and --runs (rounds, for medians)."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--rows", type=int, default=4_000_000)
    ap.add_argument("--partitions", type=int, default=8)
    ap.add_argument("--runs", type=int, default=3)
    return ap.parse_args()


def worker_env():
    """Have Spark's Python workers run this interpreter and import this checkout's spindle package."""
    os.environ["PYTHONPATH"] = os.path.join(HERE, "..", "python")
    os.environ["PYSPARK_PYTHON"] = sys.executable


COLUMNS = [f"cast(rand({i}) as float) as f{i}" for i in range(16)] + ["cast(id % 2 as float) as label"]


def frame(spark, rows, partitions):
    """The DataFrame both benches feed: 16 float32 features and a label, computed by Spark."""
    return spark.range(rows, numPartitions=partitions).selectExpr(*COLUMNS)
