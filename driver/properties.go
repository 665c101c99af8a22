package driver

import (
	"cmp"
	"fmt"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/push"
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
	if err := cfg.executorsFromProperties(p, master); err != nil {
		return cfg, master, err
	}
	cfg.jobFromProperties(p)
	if err := cfg.rolesFromProperties(p); err != nil {
		return cfg, master, err
	}
	if err := cfg.inputFromProperties(p); err != nil {
		return cfg, master, err
	}
	cfg.processFromProperties(p)
	if err := cfg.networkFromProperties(p, master); err != nil {
		return cfg, master, err
	}
	if err := cfg.controlFromProperties(p); err != nil {
		return cfg, Master{}, err
	}
	return cfg, master, nil
}

// executorsFromProperties sets the number of executors, from local[N] or
// spindle.executor.instances.
func (c *Config) executorsFromProperties(p *config.Properties, master Master) error {
	c.NumExecutors = p.Int(config.KeyExecutorInstances)
	if master.Executors > 0 {
		// local[N] and spindle.executor.instances both count executors:
		// the one from the higher source wins (an explicit flag over the
		// defaults file); given at the same level they must agree.
		ml, il := p.Level(config.KeyMaster), p.Level(config.KeyExecutorInstances)
		switch {
		case il == config.LevelDefault || ml > il:
			c.NumExecutors = master.Executors
		case il > ml:
		case c.NumExecutors != master.Executors:
			return fmt.Errorf("%w: %s %s and %s %d disagree on the number of executors; give one of them",
				ErrConfig, p.Source(config.KeyMaster), p.String(config.KeyMaster), p.Source(config.KeyExecutorInstances), c.NumExecutors)
		}
	}
	return nil
}

// jobFromProperties sets what names, shows and records the job, and its
// failure policy.
func (c *Config) jobFromProperties(p *config.Properties) {
	c.AppName = p.String(config.KeyAppName)
	c.Mode = p.String(config.KeyMaster)
	c.UIEnabled = p.Bool(config.KeyUIEnabled)
	c.JobTLS = p.Bool(config.KeyJobTLS)
	c.UIPort = p.Int(config.KeyUIPort)
	c.UIBindHost = p.String(config.KeyUIBindHost)
	c.UIToken = p.Bool(config.KeyUIToken)
	c.EventLogDir = p.String(config.KeyEventLogDir)
	c.TensorBoardDir = p.String(config.KeyTensorBoardDir)
	c.TensorBoardPublish = p.Duration(config.KeyTensorBoardPublish)
	c.Timeline = p.String(config.KeyTimeline)
	c.FailurePolicy = p.String(config.KeyFailurePolicy)
	c.MaxRestarts = p.Int(config.KeyFailureMaxRestarts)
	c.ReplaceWorkers = p.Bool(config.KeyFailureReplaceWorkers)
	c.ShrinkInPlace = p.Bool(config.KeyFailureShrinkInPlace)
	c.GrowInPlace = p.Bool(config.KeyFailureGrowInPlace)
	c.MaxBlamelessRestarts = p.Int(config.KeyFailureMaxBlamelessRestarts)
	c.HostMaxFailures = p.Int(config.KeyFailureHostMaxFailures)
	c.MinExecutors = p.Int(config.KeyFailureMinExecutors)
	c.ElasticWait = p.Duration(config.KeyFailureElasticWait)
	c.EventLogFlush = p.Duration(config.KeyEventLogFlushInterval)
	c.Settings = map[string]string{}
	for _, s := range p.Settings() {
		c.Settings[s.Key] = s.Value
	}
}

// rolesFromProperties sets the workers' and parameter servers' resources
// and the parameter servers' settings.
func (c *Config) rolesFromProperties(p *config.Properties) error {
	var err error
	c.Cores = p.Int(config.KeyExecutorCores)
	c.MemoryMB = int(p.Bytes(config.KeyExecutorMemory) >> 20)
	c.GPUs = p.Int(config.KeyExecutorGPUs)
	c.Chief = p.Bool(config.KeyChiefEnabled)
	c.PS = RoleSpec{Role: RolePS, Count: p.Int(config.KeyPSInstances), Cores: p.Int(config.KeyPSCores),
		MemoryMB: int(p.Bytes(config.KeyPSMemory) >> 20), GPUs: p.Int(config.KeyPSGPUs)}
	if c.PS.Command, err = SplitCommand(p.String(config.KeyPSCommand)); err != nil {
		return fmt.Errorf("%s: %s: %w", p.Source(config.KeyPSCommand), config.KeyPSCommand, err)
	}
	c.PS.Builtin = len(c.PS.Command) == 0
	if _, err := ps.ParseStaleness(p.String(config.KeyPSStaleness)); err != nil {
		return fmt.Errorf("%w: %s: %s: %v", ErrConfig, p.Source(config.KeyPSStaleness), config.KeyPSStaleness, err)
	}
	c.PSStaleness = p.String(config.KeyPSStaleness)
	c.PSWaitTimeout = p.Duration(config.KeyPSWaitTimeout)
	c.PSReplicas = p.Int(config.KeyPSReplicas)
	return nil
}

// inputFromProperties sets the job's input and how the feed reads it.
func (c *Config) inputFromProperties(p *config.Properties) error {
	var err error
	if f := p.String(config.KeyInputFormat); f != "" {
		c.Format = feed.Format(f)
	}
	c.Columns = p.List(config.KeyInputColumns)
	c.PartitionColumns = p.List(config.KeyPartitionColumns)
	c.Flight = feed.FlightOptions{Token: p.String(config.KeyFlightToken), CAFile: p.String(config.KeyFlightCAFile),
		TokenHosts: p.List(config.KeyFlightTokenHosts)}
	c.FlightPut = FlightPutConfig{Rows: int64(p.Int(config.KeyFlightPutRows)), BufferBytes: p.Bytes(config.KeyFlightPutBuffer),
		TokenFile: p.String(config.KeyFlightPutTokenFile), TurnEpochs: p.Int(config.KeyFlightPutTurns)}
	if spec := p.String(config.KeyFlightPutSchema); spec != "" {
		if c.FlightPut.Schema, err = push.ParseSchemaSpec(spec); err != nil {
			return fmt.Errorf("%w: %s: %s: %v", ErrConfig, p.Source(config.KeyFlightPutSchema), config.KeyFlightPutSchema, err)
		}
	}
	if len(c.PartitionColumns) > 0 && p.String(config.KeyFeedMode) == "direct" {
		return fmt.Errorf("%s: %s: partition columns are not read in direct mode (the training process reads the files itself); use --feed arrow or tensor",
			p.Source(config.KeyPartitionColumns), config.KeyPartitionColumns)
	}
	c.LabelColumn = p.String(config.KeyLabelColumn)
	var delim rune // by the file name
	if s := p.String(config.KeyCSVDelimiter); s != "" {
		if delim, err = feed.ParseCSVDelimiter(s); err != nil {
			return fmt.Errorf("%s: %s: %w", p.Source(config.KeyCSVDelimiter), config.KeyCSVDelimiter, err)
		}
	}
	c.CSV = feed.CSVOptions{Delimiter: delim, Header: p.Bool(config.KeyCSVHeader)}
	c.FeedMode = p.String(config.KeyFeedMode)
	c.BatchRows = p.Int(config.KeyBatchRows)
	c.Epochs = p.Int(config.KeyEpochs)
	c.Shuffle = p.Bool(config.KeyShuffle)
	c.Seed = int64(p.Int(config.KeySeed))
	c.ShuffleBufferRows = p.Int(config.KeyShuffleBufferRows)
	c.PrefetchBatches = p.Int(config.KeyPrefetchBatches)
	c.MemoryBudget = p.Bytes(config.KeyFeedMemory)
	c.CacheMemory = p.Bytes(config.KeyFeedCache)
	c.SpillDisk = p.Bytes(config.KeyFeedSpill)
	c.SharedMemory = p.Bool(config.KeyFeedSharedMemory)
	if c.EvenBatches, err = feed.ParseEvenMode(p.String(config.KeyEvenBatches)); err != nil {
		return err
	}
	return nil
}

// processFromProperties sets the checkpoints, the Python of the training
// process, the job's timeout and the Hadoop login.
func (c *Config) processFromProperties(p *config.Properties) {
	c.CheckpointDir = p.String(config.KeyCheckpointDir)
	c.CheckpointKeep = p.Int(config.KeyCheckpointKeep)
	c.PythonPath = p.String(config.KeyPythonPath)
	c.Python = p.String(config.KeyPython)
	c.Timeout = p.Duration(config.KeyJobTimeout)
	c.HadoopConfDir = p.String(config.KeyHadoopConfDir)
	c.HadoopUser = p.String(config.KeyHadoopUser)
	c.KerberosPrincipal = p.String(config.KeyKerberosPrincipal)
	c.KerberosKeytab = p.String(config.KeyKerberosKeytab)
}

// networkFromProperties sets the host the driver advertises and listens on.
func (c *Config) networkFromProperties(p *config.Properties, master Master) error {
	// Local executors reach the driver over loopback. Elsewhere the driver
	// advertises spindle.driver.host or, without it, the address of
	// spindle.network.interface's rule, and listens where it advertises
	// unless spindle.driver.bindHost says otherwise.
	switch h := p.String(config.KeyDriverHost); {
	case h != "":
		c.AdvertiseHost = h
	case master.Kind == MasterLocal:
		c.AdvertiseHost = "127.0.0.1"
	default:
		ifaces, err := systemInterfaces()
		if err == nil {
			c.AdvertiseHost, err = pickHost(ifaces, p.String(config.KeyNetworkInterface))
		}
		if err != nil {
			return fmt.Errorf("%s: %w", p.Source(config.KeyNetworkInterface), err)
		}
	}
	c.ListenHost = cmp.Or(p.String(config.KeyDriverBindHost), c.AdvertiseHost)
	c.Port = p.Int(config.KeyDriverPort)
	c.AdvertisePort = p.Int(config.KeyDriverAdvertisePort)
	return nil
}

// controlFromProperties sets the control plane's timings, RDMA and logging.
func (c *Config) controlFromProperties(p *config.Properties) error {
	c.RegistrationTimeout = p.Duration(config.KeyRegistrationTimeout)
	c.ArchivesMaxBytes = p.Bytes(config.KeyArchivesMaxBytes)
	c.ArchivesMaxEntries = p.Int(config.KeyArchivesMaxEntries)
	c.HeartbeatInterval = p.Duration(config.KeyHeartbeatInterval)
	c.HeartbeatTimeout = p.Duration(config.KeyHeartbeatTimeout)
	c.StopGrace = p.Duration(config.KeyStopGracePeriod)
	c.StderrTailLines = p.Int(config.KeyStderrTailLines)
	c.CollectiveTimeout = p.Duration(config.KeyCollectiveTimeout)
	c.RDMAMode = p.String(config.KeyRDMAMode)
	c.RDMADevices = p.String(config.KeyRDMADevices)
	if _, err := rdma.ParseFilter(c.RDMADevices); err != nil {
		return fmt.Errorf("%w: %s: %v", ErrConfig, p.Source(config.KeyRDMADevices), err)
	}
	c.ProgressInterval = p.Duration(config.KeyProgressInterval)
	c.NetworkInterface = p.String(config.KeyNetworkInterface)
	c.LogLevel = p.String(config.KeyLogLevel)
	return nil
}
