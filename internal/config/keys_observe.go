package config

// Names of the keys that say how a job is seen: the driver's web UI and
// /metrics, and the event log the history server reads.
const (
	KeyUIEnabled             = "spindle.ui.enabled"
	KeyUIPort                = "spindle.ui.port"
	KeyEventLogDir           = "spindle.eventLog.dir"
	KeyTensorBoardDir        = "spindle.tensorboard.dir"
	KeyTensorBoardPublish    = "spindle.tensorboard.publishInterval"
	KeyEventLogFlushInterval = "spindle.eventLog.flushInterval"
	KeyTimeline              = "spindle.timeline"
)

// observeKeys are the keys of the web UI, metrics and event log.
var observeKeys = []Key{
	{Name: KeyUIEnabled, Default: "true", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "Serve the job's web UI (ranks, logs, charts) and its Prometheus /metrics from the driver; submit prints the address. Read-only: nothing in it can stop or change the job."},
	{Name: KeyUIPort, Default: "4040", Kind: Int, Min: 0, HasMin: true, Max: 65535, HasMax: true, ReadBy: ReadBySubmit,
		Doc: "First port the web UI tries, on the driver's listen address; when it is taken the next 16 are tried, as Spark's UI does. 0 picks any free port."},
	{Name: KeyEventLogDir, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc:     "Directory (a path, file:// or hdfs:// URI) where the job writes its event log, for spindle history --dir and spindle logs to show after the job ended; empty writes none. Set it for every job here: an ended job's output is otherwise only in YARN's log aggregation.",
		Example: "hdfs:///spindle/event-logs"},
	{Name: KeyEventLogFlushInterval, Default: "10s", Kind: Duration, ReadBy: ReadBySubmit,
		Doc: "How often a running job publishes its new events to the event log (a job's end is published at once)."},
	{Name: KeyTensorBoardDir, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc:     "Directory (a path, file:// URI on the submit host, or hdfs:// URI) where the driver writes the values ranks report with spindle.report() as TensorBoard event files, one run (subdirectory) per job, tags NAME/rank N; empty writes none.",
		Example: "hdfs:///user/me/tensorboard"},
	{Name: KeyTensorBoardPublish, Default: "10s", Kind: Duration, ReadBy: ReadBySubmit,
		Doc: "How often the driver publishes newly reported values to an hdfs:// spindle.tensorboard.dir, each time as a new event file of the job's run (HDFS has no cheap append); a local directory's file grows at once."},
	{Name: KeyTimeline, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "File on the submit host where the driver writes the job's Chrome-trace timeline (open it in Perfetto or chrome://tracing): each rank's feed waits, collective operations and checkpoint saves, recorded by Spindle's Python and Go packages; empty records none."},
}
