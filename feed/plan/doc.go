// Package plan is the driver's planning of a job's input: Plan lists the
// inputs (files, directories, globs with braces, on the local disk or
// HDFS, or Arrow Flight flights), has the feed inspect each file
// (feed.Inspect: Parquet and Arrow IPC footers, CSV scans), adds Hive
// partition columns, checks that every file has the selected columns with
// the same types, and deals the rows to ranks as feed.Splits so that ranks
// differ by at most one row. CheckInputs checks that inputs exist before
// a job is shipped to a cluster. Planning retries an input file system
// that cannot be reached for PlanRequest.RetryUnavailable.
//
// Executors never link this package: they read the splits the driver
// sends them with the feed alone.
package plan
