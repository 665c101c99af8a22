#!/usr/bin/env bash
# Starts Apache Hadoop's own mini cluster (HDFS with DATANODES datanodes, YARN
# with NODEMANAGERS nodemanagers) on loopback for Spindle's real-Hadoop test
# tier, and runs until its standard input closes.
#
#   scripts/hadoop-minicluster.sh WORKDIR [DATANODES [NODEMANAGERS [SECURE_PROPERTIES]]]
#
# With SECURE_PROPERTIES the cluster runs in Kerberos mode against the KDC
# that file names (its keys: scripts/hadoop/SpindleMiniCluster.java).
#
# The cluster's client configuration goes to WORKDIR/conf (use it as
# HADOOP_CONF_DIR); a line "spindle-minicluster ready: ..." on standard output
# says it is up. Hadoop comes from Maven Central through Maven (cached in
# ~/.m2); the launcher is compiled once into ~/.cache/spindle/hadoop-<version>.
#
#   scripts/hadoop-minicluster.sh --fetch   downloads Hadoop and builds the launcher only
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
pom=$here/hadoop/pom.xml
version=$(sed -n 's:.*<hadoop.version>\(.*\)</hadoop.version>.*:\1:p' "$pom")
cache=${SPINDLE_HADOOP_CACHE:-$HOME/.cache/spindle/hadoop-$version}

command -v java >/dev/null || { echo "java is missing: apt-get install -y openjdk-17-jdk-headless" >&2; exit 3; }
command -v mvn >/dev/null || { echo "mvn is missing: apt-get install -y maven" >&2; exit 3; }

mkdir -p "$cache"
stamp=$(cat "$pom" "$here/hadoop/SpindleMiniCluster.java" | sha256sum | cut -c1-16)
if [ ! -s "$cache/classpath-$stamp.txt" ] || [ ! -f "$cache/classes-$stamp/SpindleMiniCluster.class" ]; then
  # Test binaries start launchers side by side: each builds in a directory
  # of its own and renames the result into place, the classes before the
  # classpath that says they are there; a build finished first is kept.
  build=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$build"' EXIT
  # Offline first: a warm ~/.m2 needs no network.
  if ! mvn -o -q -B -f "$pom" dependency:build-classpath -Dmdep.outputFile="$build/classpath.txt" >/dev/null 2>&1; then
    mvn -q -B -f "$pom" dependency:build-classpath -Dmdep.outputFile="$build/classpath.txt" >&2
  fi
  mkdir -p "$build/classes"
  javac -nowarn -d "$build/classes" -cp "$(cat "$build/classpath.txt")" "$here/hadoop/SpindleMiniCluster.java" 2>&1 | grep -v '^Note:' >&2 || true
  [ -f "$build/classes/SpindleMiniCluster.class" ] || { echo "javac did not build SpindleMiniCluster" >&2; exit 1; }
  if ! mv -T "$build/classes" "$cache/classes-$stamp" 2>/dev/null && [ ! -f "$cache/classes-$stamp/SpindleMiniCluster.class" ]; then
    echo "$cache/classes-$stamp is there without SpindleMiniCluster.class: remove it and run again" >&2
    exit 1
  fi
  mv "$build/classpath.txt" "$cache/classpath-$stamp.txt"
  rm -rf "$build"
  trap - EXIT
fi
[ "${1:-}" = "--fetch" ] && exit 0

work=${1:?usage: hadoop-minicluster.sh WORKDIR [DATANODES [NODEMANAGERS [SECURE_PROPERTIES]]]}
datanodes=${2:-3}
nodemanagers=${3:-3}
secure=()
if [ -n "${4:-}" ]; then
  secure=("$(cd "$(dirname "$4")" && pwd)/$(basename "$4")")
fi
# WORKDIR/ssl holds a secure cluster's ssl-server.xml and ssl-client.xml,
# which Hadoop finds on the classpath.
mkdir -p "$work/ssl"
work=$(cd "$work" && pwd)
cd "$work"
# Hadoop 3.4 reaches into JDK internals (Guice, its RPC engine).
opens=()
for p in java.lang java.lang.reflect java.util java.util.concurrent java.io java.net java.nio sun.nio.ch; do
  opens+=("--add-opens=java.base/$p=ALL-UNNAMED")
done
# Hadoop's own logs are off unless SPINDLE_HADOOP_LOG names a level
# (INFO, WARN, DEBUG): then they go to standard error. The namenode's audit
# log (who did what, authenticated how) always goes to WORKDIR/hdfs-audit.log.
level=${SPINDLE_HADOOP_LOG:-OFF}
cat >"$work/log4j.properties" <<EOF
log4j.rootLogger=$level, err
log4j.appender.err=org.apache.log4j.ConsoleAppender
log4j.appender.err.target=System.err
log4j.appender.err.layout=org.apache.log4j.PatternLayout
log4j.appender.err.layout.ConversionPattern=%d{ISO8601} %p %c{1}: %m%n
log4j.logger.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=INFO, audit
log4j.additivity.org.apache.hadoop.hdfs.server.namenode.FSNamesystem.audit=false
log4j.appender.audit=org.apache.log4j.FileAppender
log4j.appender.audit.File=$work/hdfs-audit.log
log4j.appender.audit.layout=org.apache.log4j.PatternLayout
log4j.appender.audit.layout.ConversionPattern=%m%n
EOF
exec java -Xmx1536m -XX:+UseSerialGC -XX:TieredStopAtLevel=1 "${opens[@]}" \
  -Dlog4j.configuration="file:$work/log4j.properties" -Dhadoop.log.dir="$work/logs" \
  -cp "$cache/classes-$stamp:$work/ssl:$(cat "$cache/classpath-$stamp.txt")" \
  SpindleMiniCluster "$work" "$work/conf" "$datanodes" "$nodemanagers" "${secure[@]}"
