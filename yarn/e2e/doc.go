// Package e2e runs `spindle submit --master yarn` end to end against real
// Apache Hadoop (HDFS and YARN mini clusters started by
// testbed/hadooptest), exactly as a user types it, with HADOOP_CONF_DIR
// pointing at the running cluster's configuration.
//
// Tests that only wait on their YARN applications call t.Parallel: YARN
// runs applications side by side. The secure cluster's tests do too: their
// HDFS clients get the krb5.conf and ticket cache in fsys.Options and
// their spindle processes in their environment, never through the test
// process's own (t.Setenv would make them run alone, first, while the
// other cluster idles). TestGangTimeout runs alone: its gang fills the
// cluster on purpose and would starve the others for its timeout.
//
// go test starts the first-declared parallel test first (then the others
// from the last declared back): TestSparkOnYARNIntoSpindle, the longest
// by far, is in a_spark_test.go so that it starts first rather than
// behind twenty others, at the end of the run's critical path.
package e2e
