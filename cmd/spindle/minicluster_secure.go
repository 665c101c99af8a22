package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	osuser "os/user"
	"path/filepath"
	"strings"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"
	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// secureRealm is spindle minicluster --secure's Kerberos: an MIT KDC on
// loopback with the namenode's, the ResourceManager's and the user's
// principals and keytabs under DIR/kdc.
type secureRealm struct {
	kdc        *krbtest.KDC
	user       string // the user's principal, without the realm
	userKeytab string
	nn, rm     *keytab.Keytab
}

// Service principals of the secure minicluster, as in a real cluster's
// site files (_HOST is the server's address, 127.0.0.1).
const (
	secureNNPrincipal = "nn/_HOST@" + krbtest.Realm
	secureRMPrincipal = "rm/_HOST@" + krbtest.Realm
)

// secureTokenRenewInterval and secureTokenMaxLifetime are the namenode's
// delegation-token lifetimes, Hadoop's defaults.
const (
	secureTokenRenewInterval = 24 * time.Hour
	secureTokenMaxLifetime   = 7 * 24 * time.Hour
)

// startSecureRealm starts a KDC for a new realm in dir/kdc (a restart makes
// a new one: keytabs change) and makes the principals. A missing MIT
// Kerberos program is bad input (exit 2), named.
func startSecureRealm(ctx context.Context, dir string) (*secureRealm, error) {
	if err := krbtest.Missing(); err != nil {
		return nil, cli.Exit(fmt.Sprintf("spindle minicluster --secure: %v", err), exitUsage)
	}
	kdir := filepath.Join(dir, "kdc")
	if err := os.RemoveAll(kdir); err != nil {
		return nil, fmt.Errorf("clear %s: %w", kdir, err)
	}
	if err := os.MkdirAll(kdir, 0o700); err != nil {
		return nil, fmt.Errorf("create %s: %w", kdir, err)
	}
	kdc, err := krbtest.StartKDC(ctx, krbtest.Options{Dir: kdir})
	if err != nil {
		if errors.Is(err, krbtest.ErrMissing) {
			return nil, cli.Exit(fmt.Sprintf("spindle minicluster --secure: %v", err), exitUsage)
		}
		return nil, fmt.Errorf("start the KDC: %w", err)
	}
	r := &secureRealm{kdc: kdc, user: miniclusterUser()}
	fail := func(err error) (*secureRealm, error) {
		kdc.Close()
		return nil, err
	}
	load := func(principal string) (*keytab.Keytab, error) {
		p, err := kdc.NewPrincipal(principal)
		if err != nil {
			return nil, err
		}
		kt, err := keytab.Load(p)
		if err != nil {
			return nil, fmt.Errorf("read the keytab of %s: %w", principal, err)
		}
		return kt, nil
	}
	if r.nn, err = load("nn/127.0.0.1"); err != nil {
		return fail(err)
	}
	if r.rm, err = load("rm/127.0.0.1"); err != nil {
		return fail(err)
	}
	if r.userKeytab, err = kdc.NewPrincipal(r.user); err != nil {
		return fail(err)
	}
	return r, nil
}

// miniclusterUser is the user the secure minicluster makes a principal
// for: HADOOP_USER_NAME, else the login name.
func miniclusterUser() string {
	if u := os.Getenv("HADOOP_USER_NAME"); u != "" {
		return u
	}
	if u, err := osuser.Current(); err == nil && u.Username != "" {
		return u.Username
	}
	return "spindle"
}

// secureProtection is the secure minicluster's hadoop.rpc.protection and
// dfs.data.transfer.protection: everything encrypted, as a production
// secure cluster is set up; block data in AES-CTR
// (secureDataCipherSuites), which costs far less than DIGEST-MD5's triple
// DES.
const (
	secureProtection       = "privacy"
	secureDataCipherSuites = "AES/CTR/NoPadding"
)

// hdfs makes cfg a Kerberized HDFS's: Kerberos on the namenode's RPC,
// delegation tokens for the jobs' containers, block tokens and SASL on
// datanode connections, all at privacy.
func (r *secureRealm) hdfs(cfg *hdfstest.Config) {
	cfg.SASL = hadooprpc.KerberosServer{Keytab: r.nn, Protocol: "nn", ServerID: "127.0.0.1", Protection: secureProtection}
	cfg.DataTransferProtection, cfg.DataTransferCipherSuites = secureProtection, secureDataCipherSuites
	cfg.KerberosPrincipal = secureNNPrincipal
	cfg.Superuser = r.user
	cfg.TokenRenewInterval, cfg.TokenMaxLifetime = secureTokenRenewInterval, secureTokenMaxLifetime
}

// yarn makes cfg a Kerberized YARN's: Kerberos on the ResourceManager's
// client port, and every connection at privacy (the ApplicationMasters'
// token connections too).
func (r *secureRealm) yarn(cfg *yarntest.Config) {
	cfg.ClientSASL = hadooprpc.KerberosServer{Keytab: r.rm, Protocol: "rm", ServerID: "127.0.0.1", Protection: secureProtection}
	cfg.RPCProtection = secureProtection
	cfg.Principal = secureRMPrincipal
}

// printRealm describes the realm: its KDC, its files and the servers'
// principals (the ResourceManager's with yarn).
func (r *secureRealm) printRealm(w io.Writer, yarn bool) {
	rm := ""
	if yarn {
		rm = ", ResourceManager " + secureRMPrincipal
	}
	fmt.Fprintf(w, `  kerberos    realm %s, KDC %s, krb5.conf and keytabs in %s
  principals  namenode %s%s, you %s@%s
  protection  hadoop.rpc.protection %s, dfs.data.transfer.protection %s (%s)
`, krbtest.Realm, r.kdc.Addr, r.kdc.Dir, secureNNPrincipal, rm, r.user, krbtest.Realm, secureProtection, secureProtection, secureDataCipherSuites)
}

// loginLines are the shell lines that log the user in: KRB5_CONFIG and a
// ticket from the keytab.
func (r *secureRealm) loginLines() string {
	return fmt.Sprintf("  export KRB5_CONFIG=%s\n  kinit -kt %s %s@%s\n", r.kdc.Conf, r.userKeytab, r.user, krbtest.Realm)
}

// printKeytabSubmit shows a submit that logs in from the keytab instead
// of a ticket.
func (r *secureRealm) printKeytabSubmit(w io.Writer) {
	fmt.Fprintf(w, `or, with no ticket, log in from the keytab (executors in YARN containers
read HDFS with the delegation tokens the submit obtains; in --deploy-mode
cluster the driver does too):
  spindle submit --master yarn --principal %s --keytab %s \
      --input 'hdfs:///user/%s/data/*.parquet' --label-column label -- python3 train.py
`, r.user, r.userKeytab, r.user)
}

// writeProtection adds hadoop.rpc.protection to the core-site.xml in
// confDir (the test HDFS writes its authentication, not its protection), so
// clients ask for what the servers require.
func writeProtection(confDir string) error {
	p := filepath.Join(confDir, "core-site.xml")
	b, err := os.ReadFile(p)
	if err != nil {
		return fmt.Errorf("add hadoop.rpc.protection to %s: %w", p, err)
	}
	prop := "  <property>\n    <name>hadoop.rpc.protection</name>\n    <value>" + secureProtection + "</value>\n  </property>\n</configuration>"
	text, ok := strings.CutSuffix(strings.TrimSpace(string(b)), "</configuration>")
	if !ok {
		return fmt.Errorf("add hadoop.rpc.protection to %s: it does not end with </configuration>", p)
	}
	if err := os.WriteFile(p, []byte(text+prop+"\n"), 0o644); err != nil {
		return fmt.Errorf("add hadoop.rpc.protection to %s: %w", p, err)
	}
	return nil
}
