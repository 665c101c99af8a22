// Package eventlog writes and reads a job's event log: the jobview.Events
// that describe it, as JSON lines under spindle.eventLog.dir (a local
// directory or an hdfs:// URI), so the history server can show a job after
// its driver is gone.
//
// Layout: one directory per job, <dir>/<job-id>/. While the job runs, each
// flush publishes a new segment, part-NNNNNN.jsonl, atomically (HDFS has no
// cheap append, and a reader never sees half a segment). When the job
// ends, the segments are folded into events.jsonl and removed. A reader
// takes events.jsonl when present, otherwise the segments in order, so a
// running job and a driver that died mid-run are both readable.
package eventlog
