package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

func miniclusterCommand() *cli.Command {
	return &cli.Command{
		Name:      "minicluster",
		Usage:     "run a small HDFS and YARN on this machine for demos and development",
		UsageText: "spindle minicluster --dir DIR [--secure] [--datanodes 3] [--nodemanagers 2] [--block-size 1MiB] [--put 'LOCAL_GLOB=HDFS_DIR' ...]",
		Description: `Starts a namenode and datanodes on the loopback interface that speak the
HDFS wire protocols, keeping their files under DIR (a restart with the same
DIR finds them again), and a ResourceManager and NodeManagers that speak
YARN's protocols and run containers as local processes under DIR/yarn. It
writes DIR/hadoop-conf/{core-site.xml,hdfs-site.xml,yarn-site.xml}: point
HADOOP_CONF_DIR there and hdfs:///paths reach this HDFS and
'spindle submit --master yarn' this YARN. No Java needed. Runs until
interrupted. Authentication is simple: HADOOP_USER_NAME (or your login)
names the user; you are the superuser.

With --secure it is a Kerberized cluster instead: it starts an MIT
Kerberos KDC (krb5kdc, kdb5_util and kadmin.local must be installed;
Debian: krb5-kdc krb5-admin-server krb5-user) for the realm SPINDLE.TEST
on loopback, writes DIR/kdc/krb5.conf and keytabs for the namenode, the
ResourceManager and you (HADOOP_USER_NAME or your login), and turns
Kerberos on in the site files: hdfs:// paths and spindle submit then need
a ticket (kinit -kt) or --principal and --keytab, and YARN containers read
HDFS with delegation tokens. A restart makes a new realm and keytabs.`,
		Flags: []cli.Flag{
			&cli.StringFlag{Name: "dir", Required: true, Usage: "`DIR` holding the cluster's files and hadoop-conf/"},
			&cli.IntFlag{Name: "datanodes", Value: 3, Usage: "number of datanodes"},
			&cli.IntFlag{Name: "nodemanagers", Value: 2, Usage: "number of YARN NodeManagers (0: no YARN)"},
			&cli.StringFlag{Name: "nm-memory", Value: "8GiB", Usage: "memory `SIZE` each NodeManager offers containers"},
			&cli.IntFlag{Name: "nm-vcores", Value: 8, Usage: "vcores each NodeManager offers containers"},
			&cli.StringFlag{Name: "block-size", Value: "1MiB", Usage: "block `SIZE` of new files; small, so files span several blocks"},
			&cli.IntFlag{Name: "replication", Usage: "replicas of each block (default: 3, or the number of datanodes if fewer)"},
			&cli.IntFlag{Name: "port", Usage: "namenode `PORT` (default: any free port)"},
			&cli.StringSliceFlag{Name: "put", Usage: "copy local files into HDFS at start: `LOCAL_GLOB=HDFS_DIR` (repeatable)"},
			&cli.StringFlag{Name: "log-level", Value: "info", Usage: "debug, info, warn or error"},
			&cli.BoolFlag{Name: "secure", Usage: "Kerberos on: start a KDC and write krb5.conf, keytabs and secure site files under DIR"},
		},
		Action: runMinicluster,
	}
}

func runMinicluster(c *cli.Context) error {
	log, err := newLogger(c.App.ErrWriter, c.String("log-level"))
	if err != nil {
		return err
	}
	bs, nmMem, err := miniclusterSizes(c)
	if err != nil {
		return err
	}
	dir, err := filepath.Abs(c.String("dir"))
	if err != nil {
		return fmt.Errorf("--dir: %w", err)
	}
	cfg := hdfstest.Config{
		Dir:         filepath.Join(dir, "hdfs"),
		DataNodes:   c.Int("datanodes"),
		BlockSize:   bs,
		Replication: c.Int("replication"),
		Logger:      log,
	}
	if p := c.Int("port"); p != 0 {
		cfg.NameNodePorts = []int{p}
	}
	puts, err := parsePuts(c.StringSlice("put"))
	if err != nil {
		return err
	}
	var realm *secureRealm
	if c.Bool("secure") {
		if realm, err = startSecureRealm(c.Context, dir); err != nil {
			return err
		}
		defer realm.kdc.Close()
		realm.hdfs(&cfg)
	}
	cluster, err := hdfstest.Start(c.Context, cfg)
	if err != nil {
		return err
	}
	defer cluster.Close()
	confDir := filepath.Join(dir, "hadoop-conf")
	if err := cluster.WriteConfig(confDir); err != nil {
		return err
	}
	if realm != nil {
		if err := writeProtection(confDir); err != nil {
			return err
		}
	}
	var yc *yarntest.Cluster
	if n := c.Int("nodemanagers"); n > 0 {
		ycfg := yarntest.Config{
			Dir: filepath.Join(dir, "yarn"), NodeManagers: n, NodeMemoryMB: int(nmMem >> 20), NodeVCores: c.Int("nm-vcores"),
			HadoopConfDir: confDir, Logger: log,
		}
		if realm != nil {
			realm.yarn(&ycfg)
		}
		yc, err = yarntest.Start(c.Context, ycfg)
		if err != nil {
			return err
		}
		defer yc.Close()
		if err := yc.WriteConfig(confDir); err != nil {
			return err
		}
	}
	ropts := fsys.Options{HadoopConfDir: confDir, User: cluster.Superuser(), NoTokens: true}
	if realm != nil {
		// The --put files are written as the user, logged in from the
		// keytab with the realm's krb5.conf.
		os.Setenv("KRB5_CONFIG", realm.kdc.Conf)
		ropts.KerberosPrincipal, ropts.KerberosKeytab = realm.user, realm.userKeytab
	}
	res := fsys.NewResolver(ropts)
	defer res.Close()
	for _, p := range puts {
		if err := putFiles(c.Context, res, p, c.App.Writer); err != nil {
			return err
		}
	}
	printMiniclusterUsage(c.App.Writer, cluster, yc, dir, confDir, realm)
	<-c.Context.Done()
	fmt.Fprintln(c.App.Writer, "stopping the minicluster")
	if yc != nil {
		yc.Close()
	}
	return cluster.Close()
}

// miniclusterSizes checks the flags that size the minicluster and
// returns its HDFS block size and each NodeManager's memory in bytes.
func miniclusterSizes(c *cli.Context) (bs, nmMem int64, err error) {
	bs, err = config.ParseBytes(c.String("block-size"))
	if err != nil {
		return 0, 0, fmt.Errorf("--block-size: %w", err)
	}
	if n := c.Int("nodemanagers"); n < 0 {
		return 0, 0, fmt.Errorf("--nodemanagers %d: want 0 or more", n)
	}
	nmMem, err = config.ParseBytes(c.String("nm-memory"))
	if err != nil || nmMem < 256<<20 {
		return 0, 0, fmt.Errorf("--nm-memory %q: want a size of at least 256MiB", c.String("nm-memory"))
	}
	if n := c.Int("nm-vcores"); n < 1 {
		return 0, 0, fmt.Errorf("--nm-vcores %d: want at least 1", n)
	}
	if n := c.Int("datanodes"); n < 1 {
		return 0, 0, fmt.Errorf("--datanodes %d: want at least 1", n)
	}
	if n := c.Int("replication"); n < 0 || n > c.Int("datanodes") {
		return 0, 0, fmt.Errorf("--replication %d: want between 1 and --datanodes (%d)", n, c.Int("datanodes"))
	}
	return bs, nmMem, nil
}

// put is one --put: local files to copy into an HDFS directory.
type put struct{ glob, dir string }

func parsePuts(vals []string) ([]put, error) {
	var out []put
	for _, v := range vals {
		glob, dir, ok := strings.Cut(v, "=")
		if !ok || glob == "" || !strings.HasPrefix(dir, "/") {
			return nil, fmt.Errorf("--put %q: want LOCAL_GLOB=HDFS_DIR with an absolute HDFS directory, like 'data/*.parquet=/user/me/data'", v)
		}
		out = append(out, put{glob: glob, dir: path.Clean(dir)})
	}
	return out, nil
}

// putFiles copies the files matching p.glob into p.dir on the default HDFS.
func putFiles(ctx context.Context, res *fsys.Resolver, p put, out io.Writer) error {
	names, err := filepath.Glob(p.glob)
	if err != nil {
		return fmt.Errorf("--put %s: %w", p.glob, err)
	}
	if len(names) == 0 {
		return fmt.Errorf("--put %s: no local file matches", p.glob)
	}
	hdfs, _, err := res.Resolve(ctx, "hdfs://"+p.dir)
	if err != nil {
		return err
	}
	if err := hdfs.MkdirAll(ctx, p.dir); err != nil {
		return err
	}
	for _, name := range names {
		dst := path.Join(p.dir, filepath.Base(name))
		if err := copyToFS(ctx, hdfs, name, dst); err != nil {
			return fmt.Errorf("--put %s: %w", name, err)
		}
		fmt.Fprintf(out, "put %s -> hdfs://%s\n", name, dst)
	}
	return nil
}

func copyToFS(ctx context.Context, dst fsys.FS, local, name string) error {
	in, err := os.Open(local)
	if err != nil {
		return err
	}
	defer in.Close()
	return fsys.WriteAtomic(ctx, dst, name, in)
}

func printMiniclusterUsage(w io.Writer, c *hdfstest.Cluster, yc *yarntest.Cluster, dir, confDir string, realm *secureRealm) {
	user := c.Superuser()
	what, yarnLine, yarnCmd := "HDFS is running", "", ""
	if yc != nil {
		what = "HDFS and YARN are running"
		yarnLine = fmt.Sprintf("  yarn        %s (scheduler %s), %d NodeManagers\n", yc.Addr(), yc.SchedulerAddr(), len(yc.Nodes()))
		yarnCmd = fmt.Sprintf(`  spindle submit --master yarn --num-executors 2 --executor-memory 512m \
      --input 'hdfs:///user/%s/data/*.parquet' --label-column label -- python3 train.py
`, user)
	}
	// Who you are: HADOOP_USER_NAME on a simple cluster, a Kerberos
	// login on a secure one.
	login := fmt.Sprintf("  export HADOOP_USER_NAME=%s\n", user)
	if realm != nil {
		what += " with Kerberos"
		login = realm.loginLines()
	}
	fmt.Fprintf(w, `spindle minicluster: %s
  namenode    %s
  datanodes   %d
%s  files       %s
  config      %s
`, what, c.URI(), len(c.DataNodes()), yarnLine, filepath.Join(dir, "hdfs"), confDir)
	if realm != nil {
		realm.printRealm(w, yc != nil)
	}
	fmt.Fprintf(w, `
In another shell:
  export HADOOP_CONF_DIR=%s
%s  spindle submit --master 'local[2]' --input 'hdfs:///user/%s/data/*.parquet' \
      --label-column label --checkpoint-dir hdfs:///user/%s/checkpoints -- python3 train.py
%s`, confDir, login, user, user, yarnCmd)
	if realm != nil && yc != nil {
		realm.printKeytabSubmit(w)
	}
	fmt.Fprintf(w, `
Load data with --put 'LOCAL_GLOB=/user/%s/data' when starting, or any HDFS
client. Press Ctrl-C to stop; the files stay in %s.
`, user, dir)
}
