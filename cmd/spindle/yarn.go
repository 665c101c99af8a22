package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	osuser "os/user"
	"strings"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ml/spindle/observe/jobview"
	"github.com/spindle-ml/spindle/yarn"
	yarnclient "github.com/spindle-ml/spindle/yarn/client"

	"github.com/spindle-ml/spindle/feed/plan"
)

// newYARNClusterManager builds the client-mode YARN cluster manager.
func newYARNClusterManager(ctx context.Context, p *config.Properties, logger *slog.Logger) (driver.ClusterManager, error) {
	cfg := yarn.ConfigFromProperties(p)
	cfg.Logger = logger
	return yarn.NewClusterManager(ctx, cfg)
}

// yarnAMCommand runs Spindle's ApplicationMaster inside its YARN container.
func yarnAMCommand() *cli.Command {
	return &cli.Command{
		Name:   "yarn-am",
		Usage:  "run a job's YARN ApplicationMaster (started by YARN, not by hand)",
		Hidden: true,
		Action: func(c *cli.Context) error {
			logger, err := newLogger(os.Stderr, envOr("SPINDLE_LOG_LEVEL", "info"))
			if err != nil {
				return cli.Exit(err, exitUsage)
			}
			if err := yarn.RunAM(c.Context, logger, runDriverInAM); err != nil {
				return cli.Exit(err, exitJobFailed)
			}
			return nil
		},
	}
}

// yarnContainerCommand starts an executor inside its YARN container,
// taking its secret environment from the container's credentials.
func yarnContainerCommand() *cli.Command {
	return &cli.Command{
		Name:      "yarn-container",
		Usage:     "start a command inside a YARN container (started by the ApplicationMaster)",
		ArgsUsage: "-- SPINDLE-ARGS...",
		Hidden:    true,
		Action: func(c *cli.Context) error {
			if c.NArg() == 0 {
				return cli.Exit("yarn-container: no arguments after --", exitUsage)
			}
			if err := yarn.RunContainer(c.Args().Slice()); err != nil {
				return cli.Exit(err, exitJobFailed)
			}
			return nil
		},
	}
}

func envOr(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

// yarnAppArg reports whether the first argument of status or kill is a
// YARN application id.
func yarnAppArg(c *cli.Context) bool {
	return c.NArg() == 1 && yarnclient.IsAppID(c.Args().First())
}

// standaloneMasterNamed returns why status or kill cannot go on when it
// was given no YARN application id and names no standalone master: a YARN
// user should hear about application ids, not a cluster secret.
func standaloneMasterNamed(c *cli.Context, command string) error {
	p, err := loadKeyFlags(c, adminFlags)
	if err != nil {
		return err
	}
	m, err := driver.ParseMaster(p.String(config.KeyMaster))
	switch {
	case err != nil || m.Kind == driver.MasterStandalone:
		return nil // adminClient says what is wrong, or goes on
	case m.Kind == driver.MasterYARN:
		return fmt.Errorf("spindle %s on YARN takes the application id spindle submit printed: spindle %s application_... (yarn application -list lists them)", command, command)
	}
	return fmt.Errorf("spindle %s takes a YARN application id (spindle %s application_...) or a standalone cluster's --master spindle://HOST:PORT[,HOST:PORT]", command, command)
}

// yarnClient connects to the ResourceManager of the configured Hadoop
// client configuration.
func yarnClient(c *cli.Context) (*yarnclient.Client, error) {
	p, err := loadKeyFlags(c, adminFlags)
	if err != nil {
		return nil, err
	}
	conf, err := yarnclient.LoadConf(p.String(config.KeyHadoopConfDir))
	if err != nil {
		return nil, err
	}
	rms, err := conf.RMAddrs()
	if err != nil {
		return nil, err
	}
	sec, err := conf.Security()
	if err != nil {
		return nil, err
	}
	user, err := yarnAdminUser(p.String(config.KeyHadoopUser))
	if err != nil {
		return nil, err
	}
	cfg := yarnclient.Config{RMAddrs: rms, User: user, Rounds: 2}
	if sec.Kerberos {
		// The ticket cache kinit filled, or the configured keytab; the
		// process ends soon after, taking the login with it.
		login, err := kerberos.Login(kerberos.Options{Principal: p.String(config.KeyKerberosPrincipal), Keytab: p.String(config.KeyKerberosKeytab)})
		if err != nil {
			return nil, fmt.Errorf("%w: hadoop.security.authentication is kerberos (%s): %v", yarnclient.ErrConfig, conf.Dir, err)
		}
		cfg.User = login.Credentials.UserName() + "@" + login.Credentials.Realm()
		cfg.SASL = sec.RMAuth(login)
	}
	return yarnclient.New(cfg)
}

// yarnAdminUser is the user spindle status, kill and logs name to the
// ResourceManager under simple authentication, as spindle submit picks it:
// spindle.hadoop.user, else $HADOOP_USER_NAME, else the login name.
func yarnAdminUser(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if u := os.Getenv("HADOOP_USER_NAME"); u != "" {
		return u, nil
	}
	u, err := osuser.Current()
	if err != nil || u.Username == "" {
		return "", fmt.Errorf("%w: no user to name to the ResourceManager (login name unknown: %v): set HADOOP_USER_NAME or spindle.hadoop.user", yarnclient.ErrConfig, err)
	}
	return u.Username, nil
}

// yarnStatus prints a YARN application's report (spindle status APP_ID).
func yarnStatus(c *cli.Context) error {
	cl, err := yarnClient(c)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	defer cl.Close()
	id, _ := yarnclient.ParseAppID(c.Args().First())
	r, err := cl.Report(c.Context, id)
	if err != nil {
		return cli.Exit(err, exitJobFailed)
	}
	fmt.Printf("application %s (%s, type %s) in queue %s, user %s\n", id, r.GetName(), r.GetApplicationType(), r.GetQueue(), r.GetUser())
	state := r.GetYarnApplicationState()
	fmt.Printf("state %s, final status %s, progress %.0f%%\n", state, finalStatusName(r.GetFinalApplicationStatus()), 100*r.GetProgress())
	if appEnded(state) {
		// The driver's web UI ended with the job: point to what is left.
		fmt.Printf("the job's web UI ended with it; its output: spindle logs %s (with spindle.eventLog.dir set), yarn logs -applicationId %s\n", id, id)
	} else {
		fmt.Printf("tracking URL %s\n", r.GetTrackingUrl())
		if u := r.GetOriginalTrackingUrl(); u != "" && u != "N/A" && u != r.GetTrackingUrl() {
			fmt.Printf("job's web UI %s (the tracking URL proxies it)\n", u)
		}
	}
	if d := r.GetDiagnostics(); d != "" {
		fmt.Printf("diagnostics: %s\n", d)
	}
	if state == hadooppb.YarnApplicationStateProto_RUNNING {
		showPushedInput(c.Context, r.GetOriginalTrackingUrl())
	}
	return nil
}

// appEnded reports whether a YARN application is over (its AM gone).
func appEnded(s hadooppb.YarnApplicationStateProto) bool {
	switch s {
	case hadooppb.YarnApplicationStateProto_FINISHED, hadooppb.YarnApplicationStateProto_FAILED, hadooppb.YarnApplicationStateProto_KILLED:
		return true
	}
	return false
}

// finalStatusName is a final status as yarn application -status and the
// docs print it: SUCCEEDED, not the protocol's APP_SUCCEEDED.
func finalStatusName(s hadooppb.FinalApplicationStatusProto) string {
	return strings.TrimPrefix(s.String(), "APP_")
}

// showPushedInput prints where a running job's producers push, when its
// input is pushed, and the ranks still localizing their files, from its
// driver's web UI at ui. A UI that does not
// answer is only mentioned: the report above stands on its own.
func showPushedInput(ctx context.Context, ui string) {
	base, ok := webUIBase(ui)
	if !ok {
		return
	}
	src, id, err := driverUI(ctx, base, 5*time.Second)
	var snap jobview.Snapshot
	if err == nil {
		err = src.get(ctx, "/api/jobs/"+url.PathEscape(id), &snap)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "(the job's web UI did not answer: %v)\n", err)
		return
	}
	printLiveJob(os.Stdout, snap)
}

// printLiveJob prints what spindle status adds about a running job from
// its driver's web UI: where producers push its input, when it is pushed,
// and each rank still localizing its files ("localizing: N of M bytes").
func printLiveJob(w io.Writer, snap jobview.Snapshot) {
	if p := snap.Push; p != nil {
		fmt.Fprintf(w, "pushed input: producers DoPut to %s", p.Endpoint)
		if p.TokenFile != "" {
			fmt.Fprintf(w, ", token in %s", p.TokenFile)
		}
		if p.CAFile != "" {
			fmt.Fprintf(w, ", CA certificate in %s", p.CAFile)
		}
		fmt.Fprintln(w, " (files on the driver's host)")
	}
	for _, r := range snap.Ranks {
		if r.State == jobview.RankLocalizing {
			// Fetching and unpacking --archives can take minutes.
			fmt.Fprintf(w, "rank %d on %s: %s\n", r.Rank, r.Host, r.Message)
		}
	}
}

// yarnKill kills a YARN application (spindle kill APP_ID).
func yarnKill(c *cli.Context) error {
	cl, err := yarnClient(c)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	defer cl.Close()
	id, _ := yarnclient.ParseAppID(c.Args().First())
	reason := "killed with spindle kill"
	if c.IsSet("reason") {
		reason = c.String("reason")
	}
	if _, err := cl.Kill(c.Context, id, reason); err != nil {
		return cli.Exit(err, exitJobFailed)
	}
	fmt.Printf("killed %s\n", id)
	return nil
}

// clusterModeDropped are keys the gateway does not pass to a cluster-mode
// driver: they describe the gateway (its address, its Hadoop configuration
// directory, its Kerberos login: the driver in the AM reads the gateway's
// keytab from its launch credentials, never from a path of the gateway)
// or the deploy mode itself.
var clusterModeDropped = map[string]bool{
	config.KeyDeployMode: true, config.KeyDriverHost: true, config.KeyDriverBindHost: true,
	config.KeyHadoopConfDir: true, config.KeyHadoopUser: true, config.KeyCheckpointDir: true,
	config.KeyKerberosPrincipal: true, config.KeyKerberosKeytab: true,
}

// runYARNCluster submits a job in --deploy-mode cluster: the driver runs
// in the ApplicationMaster's container; this process follows the
// application, streams the driver's output and exits with the job's result.
func runYARNCluster(ctx context.Context, props *config.Properties, cfg driver.Config, logger *slog.Logger) error {
	if err := yarn.CheckClusterInputs(cfg.Inputs); err != nil {
		return cli.Exit(err, exitUsage)
	}
	if err := checkInputsHere(ctx, cfg); err != nil {
		return err
	}
	job := yarn.ClusterJob{
		Inputs: cfg.Inputs, Command: cfg.Command, Env: cfg.Env,
		Files: cfg.Files, PyFiles: cfg.PyFiles, Archives: cfg.Archives,
		Executors: []yarn.ExecutorMemory{{Role: "executor", Key: "--executor-memory " + props.String(config.KeyExecutorMemory), MemoryMB: cfg.MemoryMB,
			SharedMemoryMB: cfg.SharedFeedMB(driver.RoleWorker)}},
	}
	if cfg.PS.Count > 0 {
		job.Executors = append(job.Executors, yarn.ExecutorMemory{Role: "parameter server", Key: "--ps-memory " + props.String(config.KeyPSMemory), MemoryMB: cfg.PS.MemoryMB})
	}
	for _, s := range props.Settings() {
		switch {
		case s.Level == config.LevelDefault || clusterModeDropped[s.Key]:
		case s.Key == config.KeyPSCommand:
			// As ShipCommand rewrote it: its script is shipped.
			job.Settings = append(job.Settings, s.Key+"="+quoteCommand(cfg.PS.Command))
		default:
			job.Settings = append(job.Settings, s.Key+"="+s.Value)
		}
	}
	if cfg.CheckpointDir != "" {
		// Made absolute against the submit's working directory already.
		job.Settings = append(job.Settings, config.KeyCheckpointDir+"="+cfg.CheckpointDir)
	}
	ycfg := yarn.ConfigFromProperties(props)
	ycfg.Logger = logger
	app, err := yarn.SubmitCluster(ctx, ycfg, job)
	if err != nil {
		if errors.Is(err, yarn.ErrConfig) || errors.Is(err, yarn.ErrUnreachable) || errors.Is(err, driver.ErrConfig) {
			return cli.Exit(err, exitUsage)
		}
		if ctx.Err() != nil {
			return cli.Exit("job interrupted before it was submitted", exitInterrupted)
		}
		return cli.Exit(fmt.Sprintf("submit to YARN: %v", err), exitJobFailed)
	}
	res := app.Follow(ctx, os.Stdout, os.Stderr)
	if err := app.Close(); err != nil {
		logger.Warn("clean up the yarn application", "app", app.ID(), "err", err)
	}
	if res.Code != 0 {
		return cli.Exit(res.Message, res.Code)
	}
	fmt.Fprintln(os.Stderr, res.Message)
	return nil
}

// checkInputsHere lists a cluster-mode job's inputs on the gateway, as a
// client-mode driver does before anything runs: a wrong --input is bad
// input (exit 2), not a FAILED application left in YARN.
func checkInputsHere(ctx context.Context, cfg driver.Config) error {
	if len(cfg.Inputs) == 0 {
		return nil
	}
	res := fsys.NewResolver(fsys.Options{HadoopConfDir: cfg.HadoopConfDir, User: cfg.HadoopUser,
		KerberosPrincipal: cfg.KerberosPrincipal, KerberosKeytab: cfg.KerberosKeytab, NoTokens: true})
	defer res.Close()
	err := plan.CheckInputs(ctx, res, cfg.Inputs, cfg.Format)
	switch {
	case err == nil:
		return nil
	case isInputError(err):
		return cli.Exit(err, exitUsage)
	}
	return cli.Exit(fmt.Sprintf("check the inputs before submitting: %v", err), exitJobFailed)
}

// quoteCommand joins words so that driver.SplitCommand splits them back.
func quoteCommand(words []string) string {
	out := make([]string, len(words))
	for i, w := range words {
		out[i] = "'" + strings.ReplaceAll(w, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// runDriverInAM runs a cluster-mode job's driver inside the YARN
// ApplicationMaster, with the AM as its cluster manager, and says how the
// job ended as spindle submit would.
func runDriverInAM(ctx context.Context, job yarn.DriverJob) yarn.JobResult {
	props, warnings, err := config.Load(config.Sources{Overrides: job.Settings})
	if err != nil {
		return yarn.JobResult{Code: exitUsage, Message: err.Error()}
	}
	logger, err := newLogger(job.Stderr, props.String(config.KeyLogLevel))
	if err != nil {
		return yarn.JobResult{Code: exitUsage, Message: err.Error()}
	}
	for _, w := range warnings {
		logger.Warn(w)
	}
	cfg, _, err := driver.ConfigFromProperties(props)
	if err != nil {
		return yarn.JobResult{Code: exitUsage, Message: err.Error()}
	}
	cfg.JobID = job.AppID
	cfg.Inputs, cfg.Command, cfg.Env = job.Inputs, job.Command, job.Env
	if cfg.Env == nil {
		cfg.Env = map[string]string{}
	}
	cfg.Files, cfg.PyFiles, cfg.Archives = job.Files, job.PyFiles, job.Archives
	cfg.Logger = logger
	cfg.Console = driver.NewConsole(job.Stdout, job.Stderr, false)
	d, err := driver.New(cfg, job.ClusterManager)
	if err != nil {
		return yarn.JobResult{Code: exitUsage, Message: err.Error()}
	}
	defer d.Close()
	logger.Info("running the job's driver in the ApplicationMaster", "job", d.JobID(), "name", cfg.AppName,
		"executors", cfg.NumExecutors, "feed", cfg.FeedMode)
	msg, code := jobOutcome(d.Run(ctx), d.JobID(), cfg)
	return yarn.JobResult{Code: code, Message: msg}
}
