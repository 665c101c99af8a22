package config

import "strings"

// Kind is the type of a property's value.
type Kind int

// Property kinds.
const (
	String Kind = iota
	Int
	Bool
	Duration // Go duration syntax: 500ms, 10s, 2m
	Bytes    // a size: 512, 64k, 256m, 2g (binary units)
	Enum     // one of Key.Enum
	List     // comma-separated strings
	HostPort // host:port, the port from 0 to 65535
)

func (k Kind) String() string {
	switch k {
	case Int:
		return "integer"
	case Bool:
		return "boolean"
	case Duration:
		return "duration"
	case Bytes:
		return "size"
	case Enum:
		return "enum"
	case List:
		return "list"
	case HostPort:
		return "host:port"
	}
	return "string"
}

// Key declares one configuration property.
type Key struct {
	Name    string
	Default string
	Kind    Kind
	Enum    []string // allowed values for Kind Enum
	Min     int64    // lower bound for Int and Bytes (inclusive), when HasMin
	HasMin  bool
	Max     int64 // upper bound for Int (inclusive), when HasMax
	HasMax  bool
	// ZeroOK allows a Duration of 0, which must then mean something
	// (documented); every other duration must be positive.
	ZeroOK bool
	// Check, when set, validates a value beyond its kind (a String that
	// must be a path, say); its error says what is wrong with the value.
	Check func(v string) error
	// ReadBy lists the commands that read the key; zero derives it from
	// the key's name (see Readers).
	ReadBy Reader
	Doc    string
	// Example is the value the template suggests, commented out, for a key
	// whose default is empty but which most sites should set.
	Example string
}

// Reader is a set of commands that read configuration.
type Reader uint8

// Commands that read configuration.
const (
	ReadBySubmit Reader = 1 << iota // spindle submit: the driver and its executors
	ReadByMaster                    // spindle master
	ReadByWorker                    // spindle worker
	ReadByAdmin                     // spindle status and spindle kill
	ReadByModel                     // spindle model

	readByAll = ReadBySubmit | ReadByMaster | ReadByWorker | ReadByAdmin
)

// String names the commands of r, as in "spindle master and spindle worker".
func (r Reader) String() string {
	var names []string
	for _, c := range []struct {
		r    Reader
		name string
	}{{ReadBySubmit, "spindle submit"}, {ReadByMaster, "spindle master"}, {ReadByWorker, "spindle worker"}, {ReadByAdmin, "spindle status/kill"}, {ReadByModel, "spindle model"}} {
		if r&c.r != 0 {
			names = append(names, c.name)
		}
	}
	switch len(names) {
	case 0:
		return "no command"
	case 1:
		return names[0]
	}
	return strings.Join(names[:len(names)-1], ", ") + " and " + names[len(names)-1]
}

// Readers returns the commands that read k: ReadBy when set, otherwise by
// its name: spindle.cluster.* every standalone command and submit,
// spindle.master.* and spindle.standalone.* the masters,
// spindle.worker.* the workers, and every other key the job (submit).
func (k Key) Readers() Reader {
	switch {
	case k.ReadBy != 0:
		return k.ReadBy
	case strings.HasPrefix(k.Name, "spindle.cluster."):
		return readByAll
	case strings.HasPrefix(k.Name, "spindle.master."), strings.HasPrefix(k.Name, "spindle.standalone."):
		return ReadByMaster
	case strings.HasPrefix(k.Name, "spindle.worker."):
		return ReadByWorker
	}
	return ReadBySubmit
}

// Names of the core job keys, for callers that read them.
const (
	KeyMaster            = "spindle.master"
	KeyAppName           = "spindle.app.name"
	KeyDeployMode        = "spindle.submit.deployMode"
	KeyExecutorInstances = "spindle.executor.instances"
	KeyExecutorCores     = "spindle.executor.cores"
	KeyExecutorMemory    = "spindle.executor.memory"
	KeyExecutorGPUs      = "spindle.executor.gpus"
	KeyQueue             = "spindle.yarn.queue"
	KeyInputFormat       = "spindle.input.format"
	KeyInputColumns      = "spindle.input.columns"
	KeyPartitionColumns  = "spindle.input.partitionColumns"
	KeyLabelColumn       = "spindle.input.labelColumn"
	KeyCSVDelimiter      = "spindle.input.csv.delimiter"
	KeyCSVHeader         = "spindle.input.csv.header"
	KeyFeedMode          = "spindle.feed.mode"
	KeyBatchRows         = "spindle.feed.batchRows"
	KeyEpochs            = "spindle.feed.epochs"
	KeyShuffle           = "spindle.feed.shuffle"
	KeySeed              = "spindle.feed.seed"
	KeyShuffleBufferRows = "spindle.feed.shuffleBufferRows"
	KeyPrefetchBatches   = "spindle.feed.prefetchBatches"
	KeyFeedMemory        = "spindle.feed.memoryBudget"
	KeyFeedCache         = "spindle.feed.cacheMemory"
	KeyFeedSpill         = "spindle.feed.spillDisk"
	KeyEvenBatches       = "spindle.feed.evenBatches"
	KeyFeedSharedMemory  = "spindle.feed.sharedMemory"
	KeyCheckpointDir     = "spindle.checkpoint.dir"
	KeyCheckpointKeep    = "spindle.checkpoint.keep"
	KeyDriverHost        = "spindle.driver.host"
	KeyDriverBindHost    = "spindle.driver.bindHost"
	KeyDriverPort        = "spindle.driver.port"
	// KeyDriverAdvertisePort is the port executors are told to dial when
	// something forwards it to spindle.driver.port.
	KeyDriverAdvertisePort = "spindle.driver.advertisePort"
	KeyRegistrationTimeout = "spindle.driver.registrationTimeout"
	KeyHeartbeatInterval   = "spindle.executor.heartbeatInterval"
	KeyHeartbeatTimeout    = "spindle.executor.heartbeatTimeout"
	KeyStopGracePeriod     = "spindle.executor.stopGracePeriod"
	KeyStderrTailLines     = "spindle.executor.stderrTailLines"
	KeyNetworkInterface    = "spindle.network.interface"
	KeyCollectiveTimeout   = "spindle.collective.timeout"
	KeyProgressInterval    = "spindle.progress.interval"
	KeyLogLevel            = "spindle.log.level"
	KeyHadoopConfDir       = "spindle.hadoop.confDir"
	KeyHadoopUser          = "spindle.hadoop.user"
	KeyPythonPath          = "spindle.python.path"
	KeyPython              = "spindle.python"
	KeyJobTimeout          = "spindle.job.timeout"
	KeyJobTLS              = "spindle.job.tls.enabled"
)

// coreKeys are the keys of a job: submit, driver, executors and feeding.
var coreKeys = []Key{
	{Name: KeyMaster, Default: "local", Kind: String, ReadBy: ReadBySubmit | ReadByAdmin,
		Doc: "Where executors run: local (child processes on this machine, spindle.executor.instances of them), local[N] (N executors), local[*] (one per CPU), spindle://host:port,host:port (standalone masters; an IPv6 host in brackets, port 7077 when left out)."},
	{Name: KeyAppName, Default: "spindle-job", Kind: String,
		Doc: "A name for the job, shown in logs and status listings."},
	{Name: KeyDeployMode, Default: "client", Kind: Enum, Enum: []string{"client", "cluster"},
		Doc: "Where the driver runs. client: in the submitting process. cluster (--master yarn only): in the YARN ApplicationMaster's container; spindle submit follows the application, streams the driver's output and exits with the job's result."},
	{Name: KeyExecutorInstances, Default: "2", Kind: Int, Min: 1, HasMin: true,
		Doc: "Number of executors (training ranks)."},
	{Name: KeyExecutorCores, Default: "1", Kind: Int, Min: 1, HasMin: true,
		Doc: "CPU cores per executor, requested from the cluster manager."},
	{Name: KeyExecutorMemory, Default: "1g", Kind: Bytes, Min: 1 << 20, HasMin: true,
		Doc: "Memory per executor, requested from the cluster manager."},
	{Name: KeyExecutorGPUs, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "GPUs per executor; each rank sees its own in CUDA_VISIBLE_DEVICES."},
	{Name: KeyQueue, Default: "default", Kind: String,
		Doc: "The YARN queue to submit to."},
	{Name: KeyInputFormat, Default: "", Kind: Enum, Enum: []string{"", "parquet", "arrow", "csv"},
		Doc: "Input format; empty infers it from each file's extension."},
	{Name: KeyInputColumns, Default: "", Kind: List,
		Doc: "Columns to feed, comma-separated; empty feeds every column."},
	{Name: KeyPartitionColumns, Default: "", Kind: List,
		Doc: "Hive-style partition keys to read as columns, comma-separated: the key of key=value directories on each file's path (dt=2026-11-01/part-0.parquet); int64 when every value is an integer, else utf8. Not with --feed direct."},
	{Name: KeyLabelColumn, Default: "", Kind: String,
		Doc: "The label column, fed last (tensor mode: as the label vector)."},
	{Name: KeyCSVDelimiter, Default: "", Kind: String,
		Doc: "CSV field delimiter: one character, or \\t (tab), space, \\u0001; empty picks it by the file name (a tab for .tsv, a comma otherwise)."},
	{Name: KeyCSVHeader, Default: "true", Kind: Bool,
		Doc: "Whether CSV files start with a header line naming the columns."},
	{Name: KeyFeedMode, Default: "arrow", Kind: Enum, Enum: []string{"arrow", "tensor", "direct"},
		Doc: "How training processes get data: arrow (Arrow IPC stream), tensor (dense float32), direct (a JSON list of splits to read)."},
	{Name: KeyBatchRows, Default: "1024", Kind: Int, Min: 1, HasMin: true,
		Doc: "Rows per fed batch."},
	{Name: KeyEpochs, Default: "1", Kind: Int, Min: 1, HasMin: true,
		Doc: "Passes over the data."},
	{Name: KeyShuffle, Default: "false", Kind: Bool,
		Doc: "Shuffle split order each epoch plus rows within a bounded buffer; deterministic for a seed."},
	{Name: KeySeed, Default: "0", Kind: Int,
		Doc: "Seed for shuffling."},
	{Name: KeyShuffleBufferRows, Default: "65536", Kind: Int, Min: 1, HasMin: true,
		Doc: "Rows held in memory by the row shuffle."},
	{Name: KeyPrefetchBatches, Default: "8", Kind: Int, Min: 0, HasMin: true,
		Doc: "Batches each executor reads ahead of its training process."},
	{Name: KeyFeedMemory, Default: "256m", Kind: Bytes, Min: 1 << 20, HasMin: true,
		Doc: "Memory an executor may hold in read-ahead and shuffle buffers."},
	{Name: KeyFeedCache, Default: "256m", Kind: Bytes, Min: 0, HasMin: true,
		Doc: "Decoded batches an executor keeps from one epoch to the next, so that later epochs skip reading and decoding the splits that fit; the rest are read again. 0 turns the cache off."},
	{Name: KeyFeedSpill, Default: "8g", Kind: Bytes, Min: 0, HasMin: true,
		Doc: "Batches of Arrow Flight input (pulled flights and pushed rows) that outgrow spindle.feed.cacheMemory, which an executor keeps on its local disk (Arrow IPC files in its work directory, removed when the feed ends) for later epochs: a flight is costly to fetch again, and pushed rows cannot be fetched again at all. 0 keeps none."},
	{Name: KeyFeedSharedMemory, Default: "true", Kind: Bool,
		Doc: "Offer training processes (package task, the spindle Python package) each epoch through memory shared with the executor instead of the socket, which saves the kernel's copies of every batch. Up to 16 MiB of batches sent ahead are held there instead of in the socket's buffers."},
	{Name: KeyEvenBatches, Default: "pad", Kind: Enum, Enum: []string{"pad", "drop", "off"},
		Doc: "Give every rank the same number of batches per epoch: pad (repeat rows of the rank's own data), drop (drop the remainder), off."},
	{Name: KeyCheckpointDir, Default: "", Kind: String,
		Doc: "Directory (local path, file:// or hdfs:// URI) for checkpoints; given to training processes as SPINDLE_CHECKPOINT_DIR."},
	{Name: KeyCheckpointKeep, Default: "3", Kind: Int, Min: 0, HasMin: true,
		Doc: "Complete checkpoints of each prefix the checkpoint APIs (task.Checkpointer, spindle.Checkpointer) keep: once a new one is complete, older complete ones beyond this many are deleted; never the newest complete one nor one still being written. 0 keeps every one. Given to training processes as SPINDLE_CHECKPOINT_KEEP."},
	{Name: KeyDriverHost, Default: "", Kind: String,
		Doc: "Address executors use to reach the driver; empty picks one by the spindle.network.interface rule (loopback for local jobs)."},
	{Name: KeyDriverBindHost, Default: "", Kind: String,
		Doc: "Address the driver listens on (control plane and web UI); empty listens where it advertises (spindle.driver.host), 0.0.0.0 on every interface."},
	{Name: KeyDriverPort, Default: "0", Kind: Int, Min: 0, HasMin: true, Max: 65535, HasMax: true,
		Doc: "Control-plane port of the driver; 0 picks a free one."},
	{Name: KeyDriverAdvertisePort, Default: "0", Kind: Int, Min: 0, HasMin: true, Max: 65535, HasMax: true,
		Doc: "Port executors are told to reach the driver's control plane on, when something (a NAT rule, a proxy) forwards it to spindle.driver.port; 0 is the port the driver listens on."},
	{Name: KeyRegistrationTimeout, Default: "120s", Kind: Duration,
		Doc: "How long the driver waits for all executors to register (the gang) before failing the job."},
	{Name: KeyHeartbeatInterval, Default: "1s", Kind: Duration,
		Doc: "How often executors report liveness and progress."},
	{Name: KeyHeartbeatTimeout, Default: "6s", Kind: Duration,
		Doc: "An executor silent for this long is declared lost and the job fails."},
	{Name: KeyStopGracePeriod, Default: "5s", Kind: Duration, ZeroOK: true, ReadBy: ReadBySubmit | ReadByMaster,
		Doc: "Time a training process gets between SIGTERM and SIGKILL when a job stops; 0 kills at once."},
	{Name: KeyStderrTailLines, Default: "20", Kind: Int, Min: 0, HasMin: true,
		Doc: "Lines of a failed training process's stderr quoted in the job's error."},
	{Name: KeyNetworkInterface, Default: "", Kind: String,
		Doc: "Network interface whose address ranks publish to each other; empty: the first non-loopback interface that is up, else loopback (local jobs always use loopback)."},
	{Name: KeyCollectiveTimeout, Default: "30s", Kind: Duration,
		Doc: "A peer silent for this long fails a collective operation (SPINDLE_COLLECTIVE_TIMEOUT)."},
	{Name: KeyProgressInterval, Default: "10s", Kind: Duration,
		Doc: "How often progress is logged when the output is not a terminal."},
	{Name: KeyLogLevel, Default: "info", Kind: Enum, Enum: []string{"debug", "info", "warn", "error"}, ReadBy: readByAll,
		Doc: "Log level of every command: the driver and its executors, masters and workers (--log-level)."},
	{Name: KeyHadoopConfDir, Default: "", Kind: String,
		Doc: "Hadoop client configuration directory; empty uses $HADOOP_CONF_DIR."},
	{Name: KeyHadoopUser, Default: "", Kind: String,
		Doc: "HDFS user; empty uses $HADOOP_USER_NAME, then the login name."},
	{Name: KeyPython, Default: "", Kind: String,
		Doc: "The Python interpreter of training processes (--python), as spark.pyspark.python: a training command starting with python or python3 runs with it instead. A path relative to the working directory may point into an --archives alias (env/bin/python). Set it when the python3 first on the PATH of the executors' hosts is not the one with your packages (torch) installed."},
	{Name: KeyJobTimeout, Default: "0", Kind: Duration, ZeroOK: true,
		Doc: "Longest time the job may run, from submit to its end; a job still running then is stopped and reported as timed out. 0: no limit."},
	{Name: KeyJobTLS, Default: "false", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "Mutual TLS on the job's driver-executor control plane and on a flight-put: push endpoint. submit makes a certificate authority for the job (kept in memory), the driver's certificates and the executors' client certificate, which travels to them as the job secret does; nothing to manage. Producers verify the push endpoint with the CA file submit writes beside the token file (grpc+tls://)."},
	{Name: KeyPythonPath, Default: "", Kind: String,
		Doc: "Directory to put on PYTHONPATH instead of the spindle Python package the spindle binary carries; empty uses the carried one, unpacked once per version into $XDG_CACHE_HOME/spindle/python (spindle python-path prints where)."},
}

// Known returns every declared key, core keys first.
func Known() []Key {
	all := make([]Key, 0, len(coreKeys)+len(roleKeys)+len(standaloneKeys)+len(yarnKeys))
	all = append(all, coreKeys...)
	all = append(all, roleKeys...)
	all = append(all, standaloneKeys...)
	all = append(all, rdmaKeys...)
	all = append(all, yarnKeys...)
	all = append(all, observeKeys...)
	all = append(all, kerberosKeys...)
	all = append(all, flightKeys...)
	all = append(all, failureKeys...)
	all = append(all, archiveKeys...)
	all = append(all, modelKeys...)
	return all
}

// Lookup returns the declaration of name.
func Lookup(name string) (Key, bool) {
	for _, k := range Known() {
		if k.Name == name {
			return k, true
		}
	}
	return Key{}, false
}
