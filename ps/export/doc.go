// Package export writes the tables of a parameter-server checkpoint to
// Parquet files after the job (spindle ps export), so that a model trained
// with the built-in parameter server can be served or inspected without
// running a job: one file per table, key uint64 and value
// fixed_size_list<float32>[dim], the same schema as a running job's
// ExportParquet.
package export
