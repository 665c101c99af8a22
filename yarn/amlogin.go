package yarn

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/driver/tokenkeeper"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ml/spindle/yarn/am"
)

// Aliases of a cluster-mode driver's Kerberos login in the
// ApplicationMaster's credentials: the only place the keytab travels.
const (
	amKeytabAlias    = "spindle.kerberos.keytab"
	amPrincipalAlias = "spindle.kerberos.principal"
	amKrb5ConfAlias  = "spindle.kerberos.krb5.conf"
)

// amLoginDir is the directory, in the AM's container, where the driver's
// keytab (and the gateway's krb5.conf) are written, mode 0700.
const amLoginDir = ".spindle-login"

// amLoginSecrets returns, for a cluster-mode job submitted with a keytab,
// the secrets that let the driver in the ApplicationMaster log in itself:
// the keytab's bytes, the login's full principal and the gateway's
// krb5.conf. nil when the gateway logged in from a ticket cache, or when
// the driver keeps no tokens (spindle.security.tokens.renew=false).
func (g *gateway) amLoginSecrets() (map[string][]byte, error) {
	if !g.sec.Kerberos || g.cfg.KerberosKeytab == "" || !g.cfg.RenewTokens || g.login == nil {
		return nil, nil
	}
	kt, err := os.ReadFile(g.cfg.KerberosKeytab)
	if err != nil {
		return nil, fmt.Errorf("%w: read the keytab for the ApplicationMaster's login: %v", ErrConfig, err)
	}
	confPath := kerberos.ConfPath("")
	krb5, err := os.ReadFile(confPath)
	if err != nil {
		return nil, fmt.Errorf("%w: read %s (KRB5_CONFIG) for the ApplicationMaster's login: %v", ErrConfig, confPath, err)
	}
	principal := g.login.Credentials.UserName() + "@" + g.login.Credentials.Realm()
	g.log.Info("the driver in the ApplicationMaster logs in from the keytab, which travels in its launch credentials",
		"principal", principal, "krb5_conf", confPath)
	return map[string][]byte{amKeytabAlias: kt, amPrincipalAlias: []byte(principal), amKrb5ConfAlias: krb5}, nil
}

// amLogin is a cluster-mode driver's Kerberos login in the AM's
// container: the principal and the keytab file written from the
// credentials.
type amLogin struct {
	principal, keytab string
}

// writeAMLogin writes the keytab of creds (and the gateway's krb5.conf,
// unless the container has KRB5_CONFIG) to files only this user can read
// under dir, points KRB5_CONFIG at that krb5.conf, and returns the login;
// ok is false when the gateway sent no keytab.
func writeAMLogin(creds *hadooprpc.Credentials, dir string) (login amLogin, ok bool, err error) {
	kt, found := creds.Secrets[amKeytabAlias]
	if !found {
		return amLogin{}, false, nil
	}
	principal := string(creds.Secrets[amPrincipalAlias])
	if principal == "" {
		return amLogin{}, false, fmt.Errorf("the ApplicationMaster's credentials hold a keytab but no %s", amPrincipalAlias)
	}
	dir = filepath.Join(dir, amLoginDir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return amLogin{}, false, fmt.Errorf("create %s for the driver's keytab: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return amLogin{}, false, fmt.Errorf("make %s private: %w", dir, err)
	}
	login = amLogin{principal: principal, keytab: filepath.Join(dir, "driver.keytab")}
	if err := writePrivate(login.keytab, kt); err != nil {
		return amLogin{}, false, err
	}
	if os.Getenv("KRB5_CONFIG") == "" {
		conf := filepath.Join(dir, "krb5.conf")
		if err := writePrivate(conf, creds.Secrets[amKrb5ConfAlias]); err != nil {
			return amLogin{}, false, err
		}
		os.Setenv("KRB5_CONFIG", conf)
	}
	return login, true, nil
}

// writePrivate writes b to path, readable by this user only.
func writePrivate(path string, b []byte) error {
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("make %s private: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

// keptAllocator is the AM's allocator as a cluster-mode driver's cluster
// manager when the driver keeps its executors' tokens: the allocator's
// methods, and the token keeper's (driver.CredentialKeeper).
type keptAllocator struct {
	*am.Allocator
	tokens *tokenkeeper.Job
}

var _ driver.CredentialKeeper = keptAllocator{}

// ExecutorCredentials returns the newest credentials for executors.
func (k keptAllocator) ExecutorCredentials() *driverpb.Credentials {
	return k.tokens.ExecutorCredentials()
}

// CredentialsInUse says every running executor uses generation.
func (k keptAllocator) CredentialsInUse(generation int64) { k.tokens.CredentialsInUse(generation) }

// startAMKeeper logs the driver in from its keytab and starts the keeper
// of its executors' tokens, as a client-mode driver on the gateway does:
// renewal, re-login and fresh tokens before their maximum lifetime.
func startAMKeeper(ctx context.Context, login amLogin, confDir string, job ClusterJob, log *slog.Logger) (*tokenkeeper.Job, error) {
	texts := append(append(append(append([]string(nil), job.Inputs...), job.Settings...), job.Command...), job.Files...)
	texts = append(append(texts, job.PyFiles...), job.Archives...)
	for _, v := range job.Env {
		texts = append(texts, v)
	}
	j, err := tokenkeeper.StartJob(ctx, tokenkeeper.JobConfig{HadoopConfDir: confDir,
		Principal: login.principal, Keytab: login.keytab, Texts: texts, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("the driver's login in the ApplicationMaster: %w", err)
	}
	if j == nil {
		return nil, fmt.Errorf("the driver's login in the ApplicationMaster: the Hadoop configuration %s is not Kerberized", confDir)
	}
	return j, nil
}

// loginSettings are the keys that make the driver's own HDFS client log
// in from the keytab rather than read with the launch tokens, which end
// at their maximum lifetime.
func (l amLogin) loginSettings() []string {
	return []string{config.KeyKerberosPrincipal + "=" + l.principal, config.KeyKerberosKeytab + "=" + l.keytab}
}

// stagingOptions say how a cluster-mode AM reaches its staging directory
// at the end: with the driver's keytab login when the gateway sent one
// (the launch tokens end at their maximum lifetime), else with the
// container's delegation tokens.
func stagingOptions(creds *hadooprpc.Credentials) fsys.Options {
	principal := string(creds.Secrets[amPrincipalAlias])
	wd, err := os.Getwd()
	if principal == "" || err != nil {
		return fsys.Options{}
	}
	kt := filepath.Join(wd, amLoginDir, "driver.keytab")
	if _, err := os.Stat(kt); err != nil {
		return fsys.Options{}
	}
	return fsys.Options{KerberosPrincipal: principal, KerberosKeytab: kt, NoTokens: true}
}
