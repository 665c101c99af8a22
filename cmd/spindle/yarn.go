package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/kerberos"
	"github.com/spindle-ml/spindle/yarn"
	yarnclient "github.com/spindle-ml/spindle/yarn/client"
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
			if err := yarn.RunAM(c.Context, logger); err != nil {
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
	user := p.String(config.KeyHadoopUser)
	if user == "" {
		user = envOr("HADOOP_USER_NAME", envOr("USER", "spindle"))
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
	fmt.Printf("state %s, final status %s, progress %.0f%%\n", r.GetYarnApplicationState(), r.GetFinalApplicationStatus(), 100*r.GetProgress())
	fmt.Printf("tracking URL %s\n", r.GetTrackingUrl())
	if u := r.GetOriginalTrackingUrl(); u != "" && u != "N/A" && u != r.GetTrackingUrl() {
		fmt.Printf("job's web UI %s (the tracking URL proxies it)\n", u)
	}
	if d := r.GetDiagnostics(); d != "" {
		fmt.Printf("diagnostics: %s\n", d)
	}
	return nil
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
