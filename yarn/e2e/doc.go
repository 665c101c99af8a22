// Package e2e runs `spindle submit --master yarn` end to end against real
// Apache Hadoop (HDFS and YARN mini clusters started by
// testbed/hadooptest), exactly as a user types it, with HADOOP_CONF_DIR
// pointing at the running cluster's configuration.
//
// Tests that only wait on their YARN applications call t.Parallel: YARN
// runs applications side by side. Those that set the process's Kerberos
// environment (the secure cluster's, t.Setenv) run alone, and so does
// TestGangTimeout, whose gang fills the cluster on purpose and would
// starve the others for its timeout.
package e2e
