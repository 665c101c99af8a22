package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	krbconfig "github.com/jcmturner/gokrb5/v8/config"
	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	yarnclient "github.com/spindle-ml/spindle/yarn/client"
)

var doctorFlags = []keyFlag{
	{&cli.StringFlag{Name: "principal", Usage: "Kerberos principal to log in as, with --keytab (default: the ticket cache kinit filled)"}, config.KeyKerberosPrincipal},
	{&cli.StringFlag{Name: "keytab", Usage: "keytab of --principal"}, config.KeyKerberosKeytab},
	{&cli.StringFlag{Name: "hadoop-conf-dir", Usage: "the Hadoop client configuration `DIR` (default: $HADOOP_CONF_DIR)"}, config.KeyHadoopConfDir},
}

// doctorCommand checks a gateway's Hadoop security setup, step by step,
// the way spindle submit will use it.
func doctorCommand() *cli.Command {
	return &cli.Command{
		Name:  "doctor",
		Usage: "check this machine's Hadoop security setup: the KDC, the login, the servers' principals, the tokens a job would get",
		Description: "Reads the Hadoop configuration ($HADOOP_CONF_DIR) and, on a Kerberized cluster, krb5.conf; " +
			"checks that a KDC of the realm answers, logs in (the ticket cache, or --principal and --keytab), gets tickets " +
			"for the ResourceManagers' principals, calls the ResourceManager and the default file system, and gets (then " +
			"cancels) the HDFS delegation token a job's containers would get. Exit status 2 names each problem found.",
		Flags:  commonFlags(doctorFlags),
		Action: runDoctor,
	}
}

// doctor prints one line per check and counts the failures.
type doctor struct {
	out      io.Writer
	problems []string
}

func (d *doctor) ok(what, format string, args ...any) {
	fmt.Fprintf(d.out, "ok    %-18s %s\n", what, fmt.Sprintf(format, args...))
}

func (d *doctor) fail(what string, err error) {
	fmt.Fprintf(d.out, "FAIL  %-18s %v\n", what, err)
	d.problems = append(d.problems, what+": "+err.Error())
}

func (d *doctor) result() error {
	if len(d.problems) == 0 {
		return nil
	}
	return cli.Exit(fmt.Sprintf("spindle doctor: %d problem(s): %s", len(d.problems), strings.Join(d.problems, "; ")), exitUsage)
}

func runDoctor(c *cli.Context) error {
	p, err := loadKeyFlags(c, doctorFlags)
	if err != nil {
		return cli.Exit(err, exitUsage)
	}
	d := &doctor{out: c.App.Writer}
	ctx, cancel := context.WithTimeout(c.Context, 2*time.Minute)
	defer cancel()

	conf, err := doctorConf(p.String(config.KeyHadoopConfDir))
	if err != nil {
		d.fail("hadoop config", err)
		return d.result()
	}
	sec, err := conf.Security()
	if err != nil {
		d.fail("hadoop config", err)
		return d.result()
	}
	protection := sec.Protection
	if protection == "" {
		protection = hadooprpc.ProtectionAuthentication
	}
	if !sec.Kerberos {
		d.ok("hadoop config", "%s: hadoop.security.authentication is simple: no Kerberos, no tokens to check", conf.Dir)
		return d.result()
	}
	d.ok("hadoop config", "%s: kerberos, hadoop.rpc.protection %s", conf.Dir, protection)

	// krb5.conf and the KDCs of the realm.
	krbPath := kerberos.ConfPath("")
	kc, err := krbconfig.Load(krbPath)
	if err != nil {
		d.fail("krb5.conf", fmt.Errorf("read %s (KRB5_CONFIG): %w", krbPath, err))
		return d.result()
	}
	principal := p.String(config.KeyKerberosPrincipal)
	realm := kc.LibDefaults.DefaultRealm
	if _, r, ok := strings.Cut(principal, "@"); ok {
		realm = r
	}
	d.ok("krb5.conf", "%s, realm %s", krbPath, realm)
	d.checkKDC(ctx, kc, realm)

	login, err := kerberos.Login(kerberos.Options{Principal: principal, Keytab: p.String(config.KeyKerberosKeytab)})
	if err != nil {
		d.fail("login", err)
		return d.result()
	}
	defer login.Destroy()
	user := login.Credentials.UserName() + "@" + login.Credentials.Realm()
	how := "the ticket cache"
	if kt := p.String(config.KeyKerberosKeytab); kt != "" {
		how = "keytab " + kt
	}
	d.ok("login", "%s (%s)", user, how)

	// The ResourceManagers, when this is a YARN gateway.
	if _, err := os.Stat(filepath.Join(conf.Dir, "yarn-site.xml")); err == nil {
		d.checkResourceManagers(ctx, conf, sec, login, user)
	}

	// The default file system and the token a job's containers would get.
	def := conf.Get("fs.defaultFS", "")
	if !strings.HasPrefix(def, "hdfs://") {
		d.ok("hdfs", "fs.defaultFS is %q: no HDFS to check", def)
		return d.result()
	}
	r := fsys.NewResolver(fsys.Options{HadoopConfDir: conf.Dir, KerberosPrincipal: principal, KerberosKeytab: p.String(config.KeyKerberosKeytab), NoTokens: true})
	defer r.Close()
	fs, _, err := r.Resolve(ctx, def+"/")
	if err != nil {
		d.fail("hdfs", err)
		return d.result()
	}
	if _, err := fs.Stat(ctx, "/"); err != nil {
		d.fail("hdfs", err)
		return d.result()
	}
	d.ok("hdfs", "%s answers %s", def, user)
	renewer := sec.Renewer()
	if renewer == "" {
		renewer = login.Credentials.UserName()
	}
	tok, err := r.DelegationToken(ctx, def+"/", renewer)
	if err != nil {
		d.fail("delegation token", err)
		return d.result()
	}
	desc := tok.Kind
	if id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier); err == nil {
		desc = fmt.Sprintf("%s for %s, owner %s, renewer %s, max date %s", tok.Kind, tok.Service, id.Owner, id.Renewer, id.MaxDate.UTC().Format(time.RFC3339))
	}
	if err := r.CancelDelegationToken(ctx, def+"/", tok); err != nil {
		d.fail("delegation token", fmt.Errorf("%s obtained but not cancelled: %w", desc, err))
		return d.result()
	}
	d.ok("delegation token", "%s (obtained and cancelled)", desc)
	return d.result()
}

// checkResourceManagers gets a ticket for each ResourceManager's principal
// and asks one of them for the cluster's metrics as user.
func (d *doctor) checkResourceManagers(ctx context.Context, conf *yarnclient.Conf, sec yarnclient.Security, login *krbclient.Client, user string) {
	rms, err := conf.RMAddrs()
	if err != nil {
		d.fail("resourcemanager", err)
	}
	for _, addr := range rms {
		host, _, _ := net.SplitHostPort(addr)
		spn, _, _ := strings.Cut(strings.ReplaceAll(sec.RMPrincipal, "_HOST", strings.ToLower(host)), "@")
		if _, _, err := login.GetServiceTicket(spn); err != nil {
			d.fail("resourcemanager", fmt.Errorf("%s: no ticket for %s (yarn.resourcemanager.principal %s): %w", addr, spn, sec.RMPrincipal, err))
			continue
		}
		d.ok("resourcemanager", "%s: ticket for %s", addr, spn)
	}
	if len(rms) > 0 {
		rm, err := yarnclient.New(yarnclient.Config{RMAddrs: rms, User: user, SASL: sec.RMAuth(login), Rounds: 1})
		if err == nil {
			var m interface{ GetNumNodeManagers() int32 }
			if m, err = rm.ClusterMetrics(ctx); err == nil {
				d.ok("resourcemanager", "%s answers %s: %d NodeManagers", rm.Addr(), user, m.GetNumNodeManagers())
			}
			rm.Close()
		}
		if err != nil {
			d.fail("resourcemanager", err)
		}
	}
}

// checkKDC dials the realm's KDCs, TCP first.
func (d *doctor) checkKDC(ctx context.Context, kc *krbconfig.Config, realm string) {
	_, kdcs, err := kc.GetKDCs(realm, true)
	if err != nil || len(kdcs) == 0 {
		d.fail("kdc", fmt.Errorf("krb5.conf names no KDC for realm %s: %v", realm, err))
		return
	}
	var errs []string
	for _, addr := range kdcs {
		dctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		conn, err := (&net.Dialer{}).DialContext(dctx, "tcp", addr)
		cancel()
		if err == nil {
			conn.Close()
			d.ok("kdc", "%s answers (realm %s)", addr, realm)
			return
		}
		errs = append(errs, err.Error())
	}
	d.fail("kdc", fmt.Errorf("no KDC of realm %s answers over TCP: %s", realm, strings.Join(errs, "; ")))
}

// doctorConf reads the Hadoop configuration of a gateway, with or without
// yarn-site.xml.
func doctorConf(dir string) (*yarnclient.Conf, error) {
	if dir == "" {
		dir = os.Getenv("HADOOP_CONF_DIR")
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: HADOOP_CONF_DIR is not set (or give --hadoop-conf-dir)", yarnclient.ErrConfig)
	}
	if _, err := os.Stat(filepath.Join(dir, "yarn-site.xml")); err == nil {
		return yarnclient.LoadConf(dir)
	}
	return yarnclient.LoadHDFSConf(dir)
}
