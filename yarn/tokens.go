package yarn

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/user"
	"strings"
	"sync"
	"time"

	krbclient "github.com/jcmturner/gokrb5/v8/client"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/driver/tokenkeeper"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ml/spindle/yarn/client"
)

// loginFor reads the cluster's security settings and, on a Kerberized
// cluster, logs in (--principal and --keytab, or the ticket cache). It
// sets cfg.User (the staging directory's owner: the login's short name on
// a Kerberized cluster) and returns the user to name to the
// ResourceManager. Every error wraps ErrConfig: nothing has run yet.
func loginFor(conf *client.Conf, cfg *Config) (client.Security, *krbclient.Client, string, error) {
	sec, err := conf.Security()
	if err != nil {
		return sec, nil, "", err
	}
	if !sec.Kerberos {
		if cfg.KerberosPrincipal != "" || cfg.KerberosKeytab != "" {
			return sec, nil, "", fmt.Errorf("%w: --principal/--keytab given but hadoop.security.authentication is not kerberos in %s", ErrConfig, conf.Dir)
		}
		if cfg.User == "" {
			cfg.User = os.Getenv("HADOOP_USER_NAME")
		}
		if cfg.User == "" {
			u, err := user.Current()
			if err != nil {
				return sec, nil, "", fmt.Errorf("%w: no user: set HADOOP_USER_NAME", ErrConfig)
			}
			cfg.User = u.Username
		}
		return sec, nil, cfg.User, nil
	}
	login, err := kerberos.Login(kerberos.Options{Principal: cfg.KerberosPrincipal, Keytab: cfg.KerberosKeytab})
	if err != nil {
		return sec, nil, "", fmt.Errorf("%w: hadoop.security.authentication is kerberos (%s): %v", ErrConfig, conf.Dir, err)
	}
	cfg.User = login.Credentials.UserName()
	if short, _, _ := strings.Cut(cfg.User, "/"); short != "" {
		cfg.User = short
	}
	return sec, login, login.Credentials.UserName() + "@" + login.Credentials.Realm(), nil
}

func destroy(login *krbclient.Client) {
	if login != nil {
		login.Destroy()
	}
}

// jobNamenodes returns the HDFS clusters a job touches, as hdfs://authority
// URIs: the default file system (the staging directory's) and every
// cluster an hdfs:// URI in the executors' arguments or environment names
// (inputs, checkpoints, outputs).
func jobNamenodes(defaultFS string, specs []driver.ExecutorSpec) []string {
	var texts []string
	for _, s := range specs {
		texts = append(texts, s.Args...)
		for _, v := range s.Env {
			texts = append(texts, v)
		}
	}
	return tokenkeeper.Namenodes(defaultFS, texts)
}

// addDelegationTokens obtains an HDFS delegation token, renewable by the
// ResourceManager, from every cluster the job touches, and puts them in
// the ApplicationMaster's credentials: the AM hands them to every
// container, whose executors read HDFS with them (they have no ticket).
func (c *ClusterManager) addDelegationTokens(ctx context.Context, creds *hadooprpc.Credentials, specs []driver.ExecutorSpec) error {
	renewer := c.sec.Renewer()
	tokens := map[string]hadooprpc.Token{}
	for _, uri := range jobNamenodes(c.conf.Get("fs.defaultFS", ""), specs) {
		tctx, cancel := context.WithTimeout(ctx, c.cfg.Timeouts.TokenFetch)
		tok, err := c.resolver.DelegationToken(tctx, uri+"/", renewer)
		cancel()
		if err != nil {
			return fmt.Errorf("%w: HDFS delegation token for the job's containers: %v", ErrConfig, err)
		}
		creds.Tokens[tok.Service] = tok
		tokens[uri] = tok
		c.log.Info("hdfs delegation token obtained", "cluster", uri, "service", tok.Service, "renewer", renewer)
	}
	c.mu.Lock()
	c.tokens = tokens
	c.mu.Unlock()
	if !c.cfg.RenewTokens {
		// The executors use these tokens; YARN renews them.
		watchLifetimes(c.ctx, &c.wg, tokens, c.log)
	}
	return nil
}

// startKeeper obtains the executors' own delegation tokens from every
// cluster the job touches, renewable by this login's user, and starts the
// keeper that renews them and, with a keytab, replaces them with fresh
// ones for the life of the job. The driver hands them to executors as
// they register.
func (c *ClusterManager) startKeeper(ctx context.Context, specs []driver.ExecutorSpec) error {
	ops := tokenkeeper.NewResolverOps(c.resolver,
		fsys.Options{HadoopConfDir: c.conf.Dir, KerberosPrincipal: c.cfg.KerberosPrincipal, KerberosKeytab: c.cfg.KerberosKeytab},
		jobNamenodes(c.conf.Get("fs.defaultFS", ""), specs), c.cfg.User)
	tokens, err := ops.Fetch(ctx, c.resolver)
	if err != nil {
		return fmt.Errorf("%w: HDFS delegation tokens for the job's executors: %v", ErrConfig, err)
	}
	k, err := tokenkeeper.New(tokens, ops, tokenkeeper.WallClock{}, c.cfg.KerberosKeytab != "", c.log)
	if err != nil {
		return err
	}
	c.mu.Lock()
	c.keeper, c.keeperOps = k, ops
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		k.Run(c.ctx)
	}()
	return nil
}

// ExecutorCredentials returns the newest delegation tokens for executors,
// or nil when the driver does not keep them (driver.CredentialKeeper).
func (c *ClusterManager) ExecutorCredentials() *driverpb.Credentials {
	c.mu.Lock()
	k := c.keeper
	c.mu.Unlock()
	if k == nil {
		return nil
	}
	return k.ExecutorCredentials()
}

// CredentialsInUse says every running executor uses generation: older
// tokens go (driver.CredentialKeeper).
func (c *ClusterManager) CredentialsInUse(generation int64) {
	c.mu.Lock()
	k := c.keeper
	c.mu.Unlock()
	if k != nil {
		k.CredentialsInUse(generation)
	}
}

// stopKeeper cancels the executors' tokens once the job has ended; the
// keeper's loop has stopped.
func (c *ClusterManager) stopKeeper(ctx context.Context) {
	c.mu.Lock()
	k, ops := c.keeper, c.keeperOps
	c.keeper, c.keeperOps = nil, nil
	c.mu.Unlock()
	if k == nil {
		return
	}
	k.CancelAll(ctx)
	ops.Close()
}

// lifetimeWarning is the share of a token's maximum lifetime after which
// the job log warns that the end is coming.
const lifetimeWarning = 0.75

// watchLifetimes warns in the job log when the first of tokens has lived
// three quarters of its maximum lifetime: YARN renews the tokens up to it,
// and a job still running then loses HDFS (the driver keeps no tokens of
// its own: renewal is off, or a cluster-mode driver has no keytab). It
// stops when ctx ends; wg waits for it.
func watchLifetimes(ctx context.Context, wg *sync.WaitGroup, tokens map[string]hadooprpc.Token, log *slog.Logger) {
	var first hadooprpc.DelegationTokenIdentifier
	cluster := ""
	for uri, tok := range tokens {
		id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
		if err != nil {
			continue
		}
		if cluster == "" || id.MaxDate.Before(first.MaxDate) {
			first, cluster = id, uri
		}
	}
	if cluster == "" {
		return
	}
	life := first.MaxDate.Sub(first.IssueDate)
	warnAt := first.IssueDate.Add(time.Duration(float64(life) * lifetimeWarning))
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTimer(time.Until(warnAt))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		log.Warn("hdfs delegation tokens near their maximum lifetime: the job cannot reach HDFS after it",
			"cluster", cluster, "max_date", first.MaxDate.UTC().Format(time.RFC3339), "left", time.Until(first.MaxDate).Round(time.Second),
			"lifetime", life.Round(time.Second))
	}()
}

// cancelDelegationTokens cancels the job's tokens once it has ended.
func (c *ClusterManager) cancelDelegationTokens(ctx context.Context) {
	c.mu.Lock()
	tokens := c.tokens
	c.tokens = nil
	c.mu.Unlock()
	for uri, tok := range tokens {
		cctx, cancel := context.WithTimeout(ctx, c.cfg.Timeouts.TokenCancel)
		if err := c.resolver.CancelDelegationToken(cctx, uri+"/", tok); err != nil {
			c.log.Warn("cancel an hdfs delegation token", "cluster", uri, "err", err)
		}
		cancel()
	}
}

// hdfsTokens returns the HDFS delegation tokens of credentials, by alias.
func hdfsTokens(creds *hadooprpc.Credentials) map[string]hadooprpc.Token {
	out := map[string]hadooprpc.Token{}
	for alias, t := range creds.Tokens {
		if t.Kind == hadooprpc.KindHDFSDelegationToken {
			out[alias] = t
		}
	}
	return out
}
