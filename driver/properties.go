package driver

import (
	"cmp"
	"fmt"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/ps"
	"github.com/spindle-ml/spindle/rdma"
)

// ConfigFromProperties builds a job's Config from loaded configuration:
// every key of the key table that concerns the driver, and the master URL
// it names. What a submit gives beyond keys (inputs, the command, --env,
// --files, the working directory) is left to the caller.
func ConfigFromProperties(p *config.Properties) (Config, Master, error) {
	var cfg Config
	master, err := ParseMaster(p.String(config.KeyMaster))
	if err != nil {
		return cfg, master, fmt.Errorf("%s (from %s)", err, p.Source(config.KeyMaster))
	}
	cfg.NumExecutors = p.Int(config.KeyExecutorInstances)
	if master.Executors > 0 {
		// local[N] and spindle.executor.instances both count executors:
		// the one from the higher source wins (an explicit flag over the
		// defaults file); given at the same level they must agree.
		ml, il := p.Level(config.KeyMaster), p.Level(config.KeyExecutorInstances)
		switch {
		case il == config.LevelDefault || ml > il:
			cfg.NumExecutors = master.Executors
		case il > ml:
		case cfg.NumExecutors != master.Executors:
			return cfg, master, fmt.Errorf("%w: %s %s and %s %d disagree on the number of executors; give one of them",
				ErrConfig, p.Source(config.KeyMaster), p.String(config.KeyMaster), p.Source(config.KeyExecutorInstances), cfg.NumExecutors)
		}
	}
	cfg.AppName = p.String(config.KeyAppName)
	cfg.Mode = p.String(config.KeyMaster)
	cfg.UIEnabled = p.Bool(config.KeyUIEnabled)
	cfg.JobTLS = p.Bool(config.KeyJobTLS)
	cfg.UIPort = p.Int(config.KeyUIPort)
	cfg.EventLogDir = p.String(config.KeyEventLogDir)
	cfg.TensorBoardDir = p.String(config.KeyTensorBoardDir)
	cfg.Timeline = p.String(config.KeyTimeline)
	cfg.FailurePolicy = p.String(config.KeyFailurePolicy)
	cfg.MaxRestarts = p.Int(config.KeyFailureMaxRestarts)
	cfg.MaxBlamelessRestarts = p.Int(config.KeyFailureMaxBlamelessRestarts)
	cfg.HostMaxFailures = p.Int(config.KeyFailureHostMaxFailures)
	cfg.MinExecutors = p.Int(config.KeyFailureMinExecutors)
	cfg.ElasticWait = p.Duration(config.KeyFailureElasticWait)
	cfg.EventLogFlush = p.Duration(config.KeyEventLogFlushInterval)
	cfg.Settings = map[string]string{}
	for _, s := range p.Settings() {
		cfg.Settings[s.Key] = s.Value
	}
	cfg.Cores = p.Int(config.KeyExecutorCores)
	cfg.MemoryMB = int(p.Bytes(config.KeyExecutorMemory) >> 20)
	cfg.GPUs = p.Int(config.KeyExecutorGPUs)
	cfg.Chief = p.Bool(config.KeyChiefEnabled)
	cfg.PS = RoleSpec{Role: RolePS, Count: p.Int(config.KeyPSInstances), Cores: p.Int(config.KeyPSCores),
		MemoryMB: int(p.Bytes(config.KeyPSMemory) >> 20), GPUs: p.Int(config.KeyPSGPUs)}
	if cfg.PS.Command, err = SplitCommand(p.String(config.KeyPSCommand)); err != nil {
		return cfg, master, fmt.Errorf("%s: %s: %w", p.Source(config.KeyPSCommand), config.KeyPSCommand, err)
	}
	cfg.PS.Builtin = len(cfg.PS.Command) == 0
	if _, err := ps.ParseStaleness(p.String(config.KeyPSStaleness)); err != nil {
		return cfg, master, fmt.Errorf("%w: %s: %s: %v", ErrConfig, p.Source(config.KeyPSStaleness), config.KeyPSStaleness, err)
	}
	cfg.PSStaleness = p.String(config.KeyPSStaleness)
	cfg.PSWaitTimeout = p.Duration(config.KeyPSWaitTimeout)
	cfg.PSReplicas = p.Int(config.KeyPSReplicas)
	if f := p.String(config.KeyInputFormat); f != "" {
		cfg.Format = feed.Format(f)
	}
	cfg.Columns = p.List(config.KeyInputColumns)
	cfg.PartitionColumns = p.List(config.KeyPartitionColumns)
	cfg.Flight = feed.FlightOptions{Token: p.String(config.KeyFlightToken), CAFile: p.String(config.KeyFlightCAFile)}
	cfg.FlightPut = FlightPutConfig{Rows: int64(p.Int(config.KeyFlightPutRows)), BufferBytes: p.Bytes(config.KeyFlightPutBuffer),
		TokenFile: p.String(config.KeyFlightPutTokenFile)}
	if spec := p.String(config.KeyFlightPutSchema); spec != "" {
		if cfg.FlightPut.Schema, err = feed.ParseSchemaSpec(spec); err != nil {
			return cfg, master, fmt.Errorf("%w: %s: %s: %v", ErrConfig, p.Source(config.KeyFlightPutSchema), config.KeyFlightPutSchema, err)
		}
	}
	if len(cfg.PartitionColumns) > 0 && p.String(config.KeyFeedMode) == "direct" {
		return cfg, master, fmt.Errorf("%s: %s: partition columns are not read in direct mode (the training process reads the files itself); use --feed arrow or tensor",
			p.Source(config.KeyPartitionColumns), config.KeyPartitionColumns)
	}
	cfg.LabelColumn = p.String(config.KeyLabelColumn)
	var delim rune // by the file name
	if s := p.String(config.KeyCSVDelimiter); s != "" {
		if delim, err = feed.ParseCSVDelimiter(s); err != nil {
			return cfg, master, fmt.Errorf("%s: %s: %w", p.Source(config.KeyCSVDelimiter), config.KeyCSVDelimiter, err)
		}
	}
	cfg.CSV = feed.CSVOptions{Delimiter: delim, Header: p.Bool(config.KeyCSVHeader)}
	cfg.FeedMode = p.String(config.KeyFeedMode)
	cfg.BatchRows = p.Int(config.KeyBatchRows)
	cfg.Epochs = p.Int(config.KeyEpochs)
	cfg.Shuffle = p.Bool(config.KeyShuffle)
	cfg.Seed = int64(p.Int(config.KeySeed))
	cfg.ShuffleBufferRows = p.Int(config.KeyShuffleBufferRows)
	cfg.PrefetchBatches = p.Int(config.KeyPrefetchBatches)
	cfg.MemoryBudget = p.Bytes(config.KeyFeedMemory)
	cfg.CacheMemory = p.Bytes(config.KeyFeedCache)
	cfg.SpillDisk = p.Bytes(config.KeyFeedSpill)
	cfg.SharedMemory = p.Bool(config.KeyFeedSharedMemory)
	if cfg.EvenBatches, err = feed.ParseEvenMode(p.String(config.KeyEvenBatches)); err != nil {
		return cfg, master, err
	}
	cfg.CheckpointDir = p.String(config.KeyCheckpointDir)
	cfg.CheckpointKeep = p.Int(config.KeyCheckpointKeep)
	cfg.PythonPath = p.String(config.KeyPythonPath)
	cfg.Python = p.String(config.KeyPython)
	cfg.Timeout = p.Duration(config.KeyJobTimeout)
	cfg.HadoopConfDir = p.String(config.KeyHadoopConfDir)
	cfg.HadoopUser = p.String(config.KeyHadoopUser)
	cfg.KerberosPrincipal = p.String(config.KeyKerberosPrincipal)
	cfg.KerberosKeytab = p.String(config.KeyKerberosKeytab)
	// Local executors reach the driver over loopback. Elsewhere the driver
	// advertises spindle.driver.host or, without it, the address of
	// spindle.network.interface's rule, and listens where it advertises
	// unless spindle.driver.bindHost says otherwise.
	switch h := p.String(config.KeyDriverHost); {
	case h != "":
		cfg.AdvertiseHost = h
	case master.Kind == MasterLocal:
		cfg.AdvertiseHost = "127.0.0.1"
	default:
		ifaces, err := systemInterfaces()
		if err == nil {
			cfg.AdvertiseHost, err = pickHost(ifaces, p.String(config.KeyNetworkInterface))
		}
		if err != nil {
			return cfg, master, fmt.Errorf("%s: %w", p.Source(config.KeyNetworkInterface), err)
		}
	}
	cfg.ListenHost = cmp.Or(p.String(config.KeyDriverBindHost), cfg.AdvertiseHost)
	cfg.Port = p.Int(config.KeyDriverPort)
	cfg.AdvertisePort = p.Int(config.KeyDriverAdvertisePort)
	cfg.RegistrationTimeout = p.Duration(config.KeyRegistrationTimeout)
	cfg.HeartbeatInterval = p.Duration(config.KeyHeartbeatInterval)
	cfg.HeartbeatTimeout = p.Duration(config.KeyHeartbeatTimeout)
	cfg.StopGrace = p.Duration(config.KeyStopGracePeriod)
	cfg.StderrTailLines = p.Int(config.KeyStderrTailLines)
	cfg.CollectiveTimeout = p.Duration(config.KeyCollectiveTimeout)
	cfg.RDMAMode = p.String(config.KeyRDMAMode)
	cfg.RDMADevices = p.String(config.KeyRDMADevices)
	if _, err := rdma.ParseFilter(cfg.RDMADevices); err != nil {
		return cfg, Master{}, fmt.Errorf("%w: %s: %v", ErrConfig, p.Source(config.KeyRDMADevices), err)
	}
	cfg.ProgressInterval = p.Duration(config.KeyProgressInterval)
	cfg.NetworkInterface = p.String(config.KeyNetworkInterface)
	cfg.LogLevel = p.String(config.KeyLogLevel)
	return cfg, master, nil
}
