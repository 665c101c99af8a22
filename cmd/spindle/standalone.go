package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/sync/errgroup"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/standalone"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/master"
	"github.com/spindle-ml/spindle/standalone/worker"
)

// clusterCommandSetup loads the configuration of a command that talks to the
// standalone cluster (master, worker, status, kill), its logger and the
// cluster secret it signs every call with.
func clusterCommandSetup(c *cli.Context, flags []keyFlag) (*config.Properties, *slog.Logger, string, error) {
	p, err := loadKeyFlags(c, flags)
	if err != nil {
		return nil, nil, "", err
	}
	logger, err := newLogger(os.Stderr, p.String(config.KeyLogLevel))
	if err != nil {
		return nil, nil, "", err
	}
	secret, err := standalone.SecretFromProperties(p)
	if err != nil {
		return nil, nil, "", err
	}
	return p, logger, secret, nil
}

var masterFlags = []keyFlag{
	{&cli.StringFlag{Name: "id", Usage: "this master's `ID` in the Raft group"}, config.KeyMasterID},
	{&cli.StringFlag{Name: "addr", Usage: "gRPC listen address, `HOST:PORT` (default 0.0.0.0:7077)"}, config.KeyMasterAddr},
	{&cli.StringFlag{Name: "raft-addr", Usage: "Raft listen address, `HOST:PORT`; keep it on a private network (default 127.0.0.1:7001)"}, config.KeyMasterRaftAddr},
	{&cli.StringFlag{Name: "peers", Usage: "every master, this one included: `ID=RAFT_HOST:PORT@GRPC_HOST:PORT,...`"}, config.KeyMasterPeers},
	{&cli.StringFlag{Name: "data-dir", Usage: "`DIR` of the Raft log and snapshots"}, config.KeyMasterDataDir},
	{&cli.StringFlag{Name: "metrics-addr", Usage: "`HOST:PORT` to serve Prometheus /metrics on (default: none)"}, config.KeyMasterMetricsAddr},
	{&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error"}, config.KeyLogLevel},
}

func masterCommand() *cli.Command {
	return &cli.Command{
		Name:  "master",
		Usage: "run a standalone master (one of a Raft group of 3 or 5)",
		Description: `Runs one master of a standalone cluster. The masters keep the cluster
state (workers, applications, executor placements) in Raft: run 3 or 5 of
them with the same --peers, each with its own --id and --data-dir.

   spindle master --id m1 --addr 10.0.0.1:7077 --raft-addr 10.0.0.1:7001 \
       --peers m1=10.0.0.1:7001@10.0.0.1:7077,m2=10.0.0.2:7001@10.0.0.2:7077,m3=10.0.0.3:7001@10.0.0.3:7077 \
       --data-dir /var/lib/spindle/master

The cluster secret comes from spindle.cluster.secretFile,
spindle.cluster.secret or $SPINDLE_CLUSTER_SECRET; it is never taken on
the command line. See conf/spindle-master.conf.example.`,
		Flags:  commonFlags(masterFlags),
		Action: runMaster,
	}
}

func runMaster(c *cli.Context) error {
	p, logger, secret, err := clusterCommandSetup(c, masterFlags)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	cfg := master.DefaultConfig()
	cfg.Secret = secret
	cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.CAFile = standalone.TLSFilesFromProperties(p)
	cfg.ID = p.String(config.KeyMasterID)
	cfg.Addr = p.String(config.KeyMasterAddr)
	cfg.RaftAddr = p.String(config.KeyMasterRaftAddr)
	if cfg.Peers, err = master.ParsePeers(strings.Join(p.List(config.KeyMasterPeers), ",")); err != nil {
		return cli.Exit(fmt.Errorf("%s: %w", p.Source(config.KeyMasterPeers), err), exitUsage)
	}
	cfg.DataDir = p.String(config.KeyMasterDataDir)
	cfg.HeartbeatTimeout = p.Duration(config.KeyMasterHeartbeatTimeout)
	cfg.ElectionTimeout = p.Duration(config.KeyMasterElectionTimeout)
	cfg.LeaderLeaseTimeout = p.Duration(config.KeyMasterLeaderLeaseTimeout)
	cfg.CommitTimeout = p.Duration(config.KeyMasterCommitTimeout)
	cfg.SnapshotInterval = p.Duration(config.KeyMasterSnapshotInterval)
	cfg.SnapshotThreshold = uint64(p.Int(config.KeyMasterSnapshotThreshold))
	cfg.TrailingLogs = uint64(p.Int(config.KeyMasterTrailingLogs))
	cfg.SnapshotRetain = p.Int(config.KeyMasterSnapshotRetain)
	cfg.WorkerTimeout = p.Duration(config.KeyMasterWorkerTimeout)
	cfg.WorkerGoneTimeout = p.Duration(config.KeyMasterWorkerGoneTimeout)
	cfg.AppTimeout = p.Duration(config.KeyMasterAppTimeout)
	cfg.LaunchTimeout = p.Duration(config.KeyMasterLaunchTimeout)
	cfg.PlaintextSecrets = p.Bool(config.KeyClusterPlaintextSecrets)
	cfg.RetainedApps = p.Int(config.KeyMasterRetainedApps)
	cfg.GangTimeout = p.Duration(config.KeyStandaloneGangTimeout)
	cfg.Placement = p.String(config.KeyStandalonePlacement)
	cfg.MaxExecutorsPerApp = p.Int(config.KeyStandaloneMaxExecutorsPerApp)
	cfg.MaxCoresPerApp = p.Int(config.KeyStandaloneMaxCoresPerApp)
	cfg.StopGrace = p.Duration(config.KeyStopGracePeriod)
	cfg.Logger = logger
	m, err := master.New(cfg)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	serve, err := serveMetrics(ctx, p.String(config.KeyMasterMetricsAddr), m.Collector(), logger)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	var g errgroup.Group
	g.Go(serve)
	runErr := m.Run(ctx)
	cancel()
	if err := errors.Join(runErr, g.Wait()); err != nil {
		return cli.Exit(err, 1)
	}
	return nil
}

var workerFlags = []keyFlag{
	{&cli.StringFlag{Name: "masters", Usage: "the masters' gRPC addresses, `HOST:PORT,...` (all of them)"}, config.KeyWorkerMasters},
	{&cli.StringFlag{Name: "id", Usage: "this worker's `ID` (default: advertised host and port)"}, config.KeyWorkerID},
	{&cli.StringFlag{Name: "addr", Usage: "gRPC listen address, `HOST:PORT` (default 0.0.0.0:7078)"}, config.KeyWorkerAddr},
	{&cli.StringFlag{Name: "advertise-host", Usage: "`HOST` masters and drivers reach this worker at"}, config.KeyWorkerAdvertiseHost},
	{&cli.StringFlag{Name: "cores", Usage: "cores offered to executors (default: every CPU)"}, config.KeyWorkerCores},
	{&cli.StringFlag{Name: "memory", Usage: "memory offered to executors, like 64g (default: all but 1 GiB)"}, config.KeyWorkerMemory},
	{&cli.StringFlag{Name: "gpus", Usage: "GPUs offered to executors (default: count /dev/nvidiaN)"}, config.KeyWorkerGPUs},
	{&cli.StringFlag{Name: "work-dir", Usage: "`DIR` of executors' working directories and logs"}, config.KeyWorkerWorkDir},
	{&cli.StringFlag{Name: "metrics-addr", Usage: "`HOST:PORT` to serve Prometheus /metrics on (default: none)"}, config.KeyWorkerMetricsAddr},
	{&cli.StringFlag{Name: "log-level", Usage: "debug, info, warn or error"}, config.KeyLogLevel},
}

func workerCommand() *cli.Command {
	return &cli.Command{
		Name:  "worker",
		Usage: "run a standalone worker that runs executors for the masters",
		Description: `Runs a worker of a standalone cluster: it registers its cores, memory and
GPUs with the masters and runs the executors they place on it.

   spindle worker --masters 10.0.0.1:7077,10.0.0.2:7077,10.0.0.3:7077 \
       --cores 32 --memory 240g --gpus 8 --work-dir /var/lib/spindle/work

The cluster secret comes from spindle.cluster.secretFile,
spindle.cluster.secret or $SPINDLE_CLUSTER_SECRET (never the command line).`,
		Flags:  commonFlags(workerFlags),
		Action: runWorker,
	}
}

func runWorker(c *cli.Context) error {
	p, logger, secret, err := clusterCommandSetup(c, workerFlags)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	cfg := worker.DefaultConfig()
	cfg.Secret = secret
	cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.CAFile = standalone.TLSFilesFromProperties(p)
	for _, m := range p.List(config.KeyWorkerMasters) {
		cfg.Masters = append(cfg.Masters, strings.TrimPrefix(m, "spindle://"))
	}
	cfg.ID = p.String(config.KeyWorkerID)
	cfg.Addr = p.String(config.KeyWorkerAddr)
	cfg.AdvertiseHost = p.String(config.KeyWorkerAdvertiseHost)
	cfg.Cores = p.Int(config.KeyWorkerCores)
	if mem := p.Bytes(config.KeyWorkerMemory); mem > 0 {
		if mem < 1<<20 {
			return cli.Exit(fmt.Sprintf("%s: %s: %d bytes is less than 1 MiB; write a unit, like %dm or %dg",
				p.Source(config.KeyWorkerMemory), config.KeyWorkerMemory, mem, mem, mem), exitUsage)
		}
		cfg.MemoryMB = mem >> 20
	}
	cfg.GPUs = p.Int(config.KeyWorkerGPUs)
	if d := p.String(config.KeyWorkerWorkDir); d != "" {
		cfg.WorkDir = d
	}
	cfg.HeartbeatInterval = p.Duration(config.KeyWorkerHeartbeatInterval)
	cfg.StopGrace = p.Duration(config.KeyWorkerStopGracePeriod)
	cfg.CleanupDelay = p.Duration(config.KeyWorkerCleanupDelay)
	cfg.LogMaxBytes = p.Bytes(config.KeyWorkerLogMaxSize)
	cfg.LogMaxFiles = p.Int(config.KeyWorkerLogMaxFiles)
	cfg.DisableCgroups = !p.Bool(config.KeyWorkerCgroups)
	cfg.CgroupRoot = p.String(config.KeyWorkerCgroupRoot)
	cfg.CgroupParent = p.String(config.KeyWorkerCgroupParent)
	cfg.Logger = logger
	w, err := worker.New(cfg)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	defer w.Close()
	ctx, cancel := context.WithCancel(c.Context)
	defer cancel()
	serve, err := serveMetrics(ctx, p.String(config.KeyWorkerMetricsAddr), w.Collector(), logger)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	var g errgroup.Group
	g.Go(serve)
	runErr := w.Run(ctx)
	cancel()
	if err := errors.Join(runErr, g.Wait()); err != nil {
		if errors.Is(err, worker.ErrRefused) {
			return cli.Exit(err, exitUsage)
		}
		return cli.Exit(err, 1)
	}
	return nil
}

var adminFlags = []keyFlag{
	{&cli.StringFlag{Name: "master", Usage: "the standalone masters, `spindle://HOST:PORT,HOST:PORT,...`"}, config.KeyMaster},
}

// adminClient connects to the masters of --master (or spindle.master).
func adminClient(c *cli.Context) (*client.Client, error) {
	p, logger, secret, err := clusterCommandSetup(c, adminFlags)
	if err != nil {
		return nil, err
	}
	m, err := driver.ParseMaster(p.String(config.KeyMaster))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", p.Source(config.KeyMaster), err)
	}
	if m.Kind != driver.MasterStandalone {
		if p.Level(config.KeyMaster) == config.LevelDefault {
			return nil, fmt.Errorf("no masters named: give --master spindle://host:port,... (or spindle.master in spindle-defaults.conf)")
		}
		//lint:ignore ST1005 the message ends with the address syntax, whose "..." is part of it
		return nil, fmt.Errorf("%s: master %q is not a standalone cluster; give --master spindle://host:port,...",
			p.Source(config.KeyMaster), p.String(config.KeyMaster))
	}
	cfg := client.Config{Masters: m.Addrs, Secret: secret, Logger: logger, FailFast: true}
	cfg.TLS.CertFile, cfg.TLS.KeyFile, cfg.TLS.CAFile = standalone.TLSFilesFromProperties(p)
	return client.New(cfg)
}

func statusCommand() *cli.Command {
	return &cli.Command{
		Name:      "status",
		Usage:     "show a YARN application, or a standalone cluster: masters (and who leads), workers, applications, executors",
		ArgsUsage: "[APPLICATION_ID]",
		Description: `With a YARN application id (application_..., as spindle submit prints
it), prints the ResourceManager's report of the application and, while it
runs, what its driver's web UI says (ranks still localizing their files,
where pushed input goes). The user is spindle.hadoop.user, else
$HADOOP_USER_NAME, else the login name (or the Kerberos login).

Without one, shows the standalone cluster of --master spindle://HOST:PORT,...
(or spindle.master), authenticated with SPINDLE_CLUSTER_SECRET.`,
		Flags: append(commonFlags(adminFlags),
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"},
			&cli.StringFlag{Name: "app", Usage: "only this application (`ID` or name) and its executors"},
			&cli.BoolFlag{Name: "running", Usage: "only applications that have not ended"},
			&cli.BoolFlag{Name: "json", Usage: "one JSON object, for scripts"}),
		Action: func(c *cli.Context) error {
			if yarnAppArg(c) {
				return yarnStatus(c)
			}
			if c.NArg() > 0 {
				return cli.Exit(fmt.Sprintf("unexpected argument %q: spindle status takes --app ID (or a YARN application id)", c.Args().First()), exitUsage)
			}
			if err := standaloneMasterNamed(c, "status"); err != nil {
				return cli.Exit(err, exitUsage)
			}
			cl, err := adminClient(c)
			if err != nil {
				return cli.Exit(err, exitUsage)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			st, err := cl.Status(ctx)
			if err != nil {
				return cli.Exit(err, 1)
			}
			if app := c.String("app"); app != "" || c.Bool("running") {
				st = st.Only(app, c.Bool("running"))
				if app != "" && len(st.Cluster.GetApps()) == 0 {
					return cli.Exit(fmt.Sprintf("no application %s on the cluster (spindle status lists them)", app), exitUsage)
				}
			}
			if c.Bool("json") {
				return st.WriteJSON(os.Stdout)
			}
			return st.WriteText(os.Stdout)
		},
	}
}

func killCommand() *cli.Command {
	return &cli.Command{
		Name:      "kill",
		Usage:     "end a YARN application, or an application on a standalone cluster, and stop its executors",
		ArgsUsage: "APP",
		Description: `APP is a YARN application id (application_..., as spindle submit prints
it): the ResourceManager kills the application, as yarn application -kill
does, in the name of spindle.hadoop.user, else $HADOOP_USER_NAME, else the
login name (or the Kerberos login).

Otherwise APP is an application id on the standalone cluster of --master
spindle://HOST:PORT,... (from spindle status) or the name of exactly one
running application there. Its driver sees its executors stopped and fails.`,
		Flags: append(commonFlags(adminFlags),
			&cli.StringFlag{Name: "reason", Usage: "why, shown to the job's driver"},
			&cli.DurationFlag{Name: "timeout", Value: 10 * time.Second, Usage: "give up after this long"}),
		Action: func(c *cli.Context) error {
			if c.NArg() != 1 {
				return cli.Exit("name one application: spindle kill application_... (YARN) or spindle kill --master spindle://... APP", exitUsage)
			}
			if yarnAppArg(c) {
				return yarnKill(c)
			}
			if err := standaloneMasterNamed(c, "kill"); err != nil {
				return cli.Exit(err, exitUsage)
			}
			cl, err := adminClient(c)
			if err != nil {
				return cli.Exit(err, exitUsage)
			}
			defer cl.Close()
			ctx, cancel := context.WithTimeout(c.Context, c.Duration("timeout"))
			defer cancel()
			app, err := cl.Kill(ctx, c.Args().First(), c.String("reason"))
			switch {
			case errors.Is(err, standalone.ErrAppEnded):
				// Nothing was stopped: say how it ended, and not 0.
				return cli.Exit(err, 1)
			case errors.Is(err, standalone.ErrUnknownApp):
				return cli.Exit(fmt.Sprintf("%v (spindle status lists the applications)", err), exitUsage)
			case err != nil:
				return cli.Exit(err, 1)
			}
			fmt.Printf("killed %s (%s)\n", app.GetId(), app.GetName())
			return nil
		},
	}
}
