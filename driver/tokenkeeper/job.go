package tokenkeeper

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/colinmarc/hdfs/v2/hadoopconf"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
)

// ErrLogin wraps the errors of StartJob found before anything ran: no
// ticket and no keytab, a keytab without its principal, a namenode that
// issues no token.
var ErrLogin = errors.New("tokenkeeper: cannot obtain delegation tokens")

// JobConfig says where a job's executors' tokens come from.
type JobConfig struct {
	// HadoopConfDir holds core-site.xml; empty means $HADOOP_CONF_DIR.
	HadoopConfDir string
	// Principal and Keytab log in (--principal, --keytab); empty, the
	// ticket cache is used and no fresh tokens can be had.
	Principal, Keytab string
	// Texts are the executors' arguments and environment values: every
	// hdfs://authority they name gets a token, beside the default file
	// system's.
	Texts  []string
	Logger *slog.Logger
	// Timeouts bound the calls to the clusters' NameNodes; zero fields
	// take DefaultTimeouts' values.
	Timeouts Timeouts
}

// Timeouts bound a keeper's calls to the clusters' NameNodes.
type Timeouts struct {
	// Fetch bounds getting one token, Renew renewing one, Cancel
	// cancelling one.
	Fetch, Renew, Cancel time.Duration
	// Refresh bounds replacing a generation with fresh tokens (one from
	// every cluster); Close cancelling every token as the job ends.
	Refresh, Close time.Duration
}

// DefaultTimeouts returns the bounds a zero Timeouts field takes.
func DefaultTimeouts() Timeouts {
	return Timeouts{Fetch: 30 * time.Second, Renew: 30 * time.Second, Cancel: 10 * time.Second,
		Refresh: time.Minute, Close: 30 * time.Second}
}

// withDefaults returns t with zero fields set to DefaultTimeouts'.
func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	t.Fetch = cmp.Or(t.Fetch, d.Fetch)
	t.Renew = cmp.Or(t.Renew, d.Renew)
	t.Cancel = cmp.Or(t.Cancel, d.Cancel)
	t.Refresh = cmp.Or(t.Refresh, d.Refresh)
	t.Close = cmp.Or(t.Close, d.Close)
	return t
}

// Job keeps the tokens of one job's executors with a login of its own,
// for a cluster manager that holds none (the standalone one).
type Job struct {
	keeper *Keeper
	ops    *ResolverOps
	r      *fsys.Resolver
	close  time.Duration // Timeouts.Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// Kerberized says whether the Hadoop configuration in dir (or
// $HADOOP_CONF_DIR) asks for Kerberos (hadoop.security.authentication).
func Kerberized(dir string) (bool, error) {
	if dir == "" {
		dir = os.Getenv("HADOOP_CONF_DIR")
	}
	if dir == "" {
		return false, nil
	}
	conf, err := hadoopconf.Load(dir)
	if err != nil {
		return false, fmt.Errorf("load %s: %w", dir, err)
	}
	return strings.EqualFold(conf["hadoop.security.authentication"], "kerberos"), nil
}

var hdfsURIRE = regexp.MustCompile(`hdfs://[^/\s,;'"]*`)

// Namenodes returns the HDFS clusters, as hdfs://authority, that
// defaultFS and every hdfs:// URI in texts name, sorted.
func Namenodes(defaultFS string, texts []string) []string {
	seen := map[string]bool{}
	add := func(u string) {
		p, err := url.Parse(u)
		if err != nil || p.Host == "" {
			// hdfs:///path is on the default file system.
			return
		}
		seen["hdfs://"+p.Host] = true
	}
	add(defaultFS)
	for _, t := range texts {
		for _, m := range hdfsURIRE.FindAllString(t, -1) {
			add(m)
		}
	}
	out := make([]string, 0, len(seen))
	for u := range seen {
		out = append(out, u)
	}
	sort.Strings(out)
	return out
}

// StartJob logs in, obtains a delegation token from every cluster the job
// touches, renewable by the login's user, and keeps them until Close. It
// returns nil, nil when the Hadoop configuration is not Kerberized.
func StartJob(ctx context.Context, cfg JobConfig) (*Job, error) {
	dir := cfg.HadoopConfDir
	if dir == "" {
		dir = os.Getenv("HADOOP_CONF_DIR")
	}
	secure, err := Kerberized(dir)
	if err != nil || !secure {
		return nil, err
	}
	conf, err := hadoopconf.Load(dir)
	if err != nil {
		return nil, fmt.Errorf("load %s: %w", dir, err)
	}
	defaultFS := conf["fs.defaultFS"]
	if defaultFS == "" {
		defaultFS = conf["fs.default.name"]
	}
	login, err := kerberos.Login(kerberos.Options{Principal: cfg.Principal, Keytab: cfg.Keytab})
	if err != nil {
		return nil, fmt.Errorf("%w: hadoop.security.authentication is kerberos (%s): %v", ErrLogin, dir, err)
	}
	renewer, _, _ := strings.Cut(login.Credentials.UserName(), "/")
	login.Destroy()
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	opts := fsys.Options{HadoopConfDir: dir, KerberosPrincipal: cfg.Principal, KerberosKeytab: cfg.Keytab, NoTokens: true}
	r := fsys.NewResolver(opts)
	uris := Namenodes(defaultFS, cfg.Texts)
	timeouts := cfg.Timeouts.withDefaults()
	ops := NewResolverOps(r, opts, uris, renewer)
	ops.fetch = timeouts.Fetch
	tokens, err := ops.Fetch(ctx, r)
	if err != nil {
		r.Close()
		return nil, fmt.Errorf("%w: HDFS delegation tokens for the job's executors: %v", ErrLogin, err)
	}
	for uri, tok := range tokens {
		if id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier); err == nil {
			log.Info("hdfs delegation token obtained for the executors", "cluster", uri, "token", id.String())
		}
	}
	k, err := New(tokens, ops, WallClock{}, cfg.Keytab != "", log)
	if err != nil {
		r.Close()
		return nil, err
	}
	k.timeouts = timeouts
	runCtx, cancel := context.WithCancel(context.Background())
	j := &Job{keeper: k, ops: ops, r: r, close: timeouts.Close, cancel: cancel}
	j.wg.Add(1)
	go func() {
		defer j.wg.Done()
		k.Run(runCtx)
	}()
	return j, nil
}

// ExecutorCredentials returns the newest credentials for executors.
func (j *Job) ExecutorCredentials() *driverpb.Credentials { return j.keeper.ExecutorCredentials() }

// CredentialsInUse says every running executor uses generation.
func (j *Job) CredentialsInUse(generation int64) { j.keeper.CredentialsInUse(generation) }

// Close stops keeping the tokens and cancels them: the job has ended.
func (j *Job) Close() {
	j.once.Do(func() {
		j.cancel()
		j.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), j.close)
		defer cancel()
		j.keeper.CancelAll(ctx)
		j.ops.Close()
		j.r.Close()
	})
}
