// Package e2e runs `spindle submit --master yarn` end to end against real
// Apache Hadoop (HDFS and YARN mini clusters started by
// testbed/hadooptest), exactly as a user types it, with HADOOP_CONF_DIR
// pointing at the running cluster's configuration.
package e2e
