#!/usr/bin/env bash
# Builds the Spark pusher's jar (jvm/spark-push) into python/spindle/jars/,
# where the wheel carries it and spindle.spark.push finds it.
#
# Maven shades the Arrow Flight client and what Spark lacks into one jar
# (jvm/spark-push/pom.xml); the pusher itself is compiled against the
# Spark jars of the pyspark that $PYSPARK_PYTHON (the Python API's test
# venv by default) imports, and added to it. Skips the build when the jar
# is newer than its sources; prints why and exits 3 when Maven, a JDK or
# pyspark is missing.
set -euo pipefail
cd "$(dirname "$0")/.."
src=jvm/spark-push
out=python/spindle/jars/spindle-spark.jar
python=${PYSPARK_PYTHON:-${SPINDLE_PY_VENV:-$HOME/.cache/spindle-py-venv}/bin/python}

if [ -f "$out" ] && [ -z "$(find "$src" -newer "$out" -type f -not -path "$src/target/*" | head -1)" ]; then
  exit 0
fi
command -v mvn >/dev/null || { echo "build-spark-jar: mvn is missing: apt-get install -y maven" >&2; exit 3; }
command -v javac >/dev/null || { echo "build-spark-jar: javac is missing: apt-get install -y openjdk-17-jdk-headless" >&2; exit 3; }
sparkjars=$("$python" -c 'import os, pyspark; print(os.path.join(os.path.dirname(pyspark.__file__), "jars"))' 2>/dev/null) ||
  { echo "build-spark-jar: $python cannot import pyspark (make deps installs it)" >&2; exit 3; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# Maven's output is shown only when it fails.
mvn -q -B -Dstyle.color=never -f "$src/pom.xml" package >"$work/mvn.log" 2>&1 ||
  { cat "$work/mvn.log" >&2; echo "build-spark-jar: mvn package of $src/pom.xml failed" >&2; exit 1; }
mkdir "$work/classes"
# Java 11 bytecode, Arrow Flight 19's own floor (Spark 4, the only Spark that
# loads the jar, runs on 17 or later).
javac -nowarn --release 11 -d "$work/classes" -cp "$sparkjars/*:$src/target/spindle-spark-1.jar" \
  $(find "$src/java" -name '*.java')
cp "$src/target/spindle-spark-1.jar" "$work/spindle-spark.jar"
jar uf "$work/spindle-spark.jar" -C "$work/classes" .
mkdir -p "$(dirname "$out")"
mv "$work/spindle-spark.jar" "$out.tmp" && mv "$out.tmp" "$out"
