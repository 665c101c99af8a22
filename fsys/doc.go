// Package fsys gives Spindle one view of the file systems it reads inputs
// from and writes checkpoints to: the local disk (file:// URIs and plain
// paths) and HDFS (hdfs:// URIs, configured from HADOOP_CONF_DIR).
//
// Writes are atomic: a file is written under a temporary name and renamed
// into place on Commit, so a failed or interrupted write never leaves a file
// that looks complete.
package fsys
