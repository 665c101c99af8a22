package yarn

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"path"
	"strconv"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/driver/tokenkeeper"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/envcontract"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// ApplicationType is the type Spindle's applications have in YARN.
const ApplicationType = "SPINDLE"

// Errors of the client-mode cluster manager.
var (
	// ErrConfig is wrapped by every configuration error (found before
	// anything ran).
	ErrConfig = client.ErrConfig
	// ErrUnreachable: no ResourceManager answered.
	ErrUnreachable = client.ErrUnreachable
	// ErrAppEnded: the application ended while the driver still needed it.
	ErrAppEnded = errors.New("yarn: application ended")
)

// Config configures a client-mode ClusterManager.
type Config struct {
	// HadoopConfDir holds yarn-site.xml and core-site.xml; empty means
	// $HADOOP_CONF_DIR.
	HadoopConfDir string
	// User submits the application; empty means $HADOOP_USER_NAME, then
	// the login name.
	User        string
	AppName     string
	Queue       string
	Priority    int
	Tags        []string
	MaxAttempts int
	// AMMemoryMB and AMCores size the ApplicationMaster's container.
	AMMemoryMB int
	AMCores    int
	// MemoryOverheadMB is added to each executor's memory in its ask.
	MemoryOverheadMB int
	// GangTimeout bounds the wait for a whole gang of containers.
	GangTimeout time.Duration
	// LocalityWait is how long a container request stays on the nodes
	// holding its executor's input, then on their racks, before YARN may
	// place it anywhere; zero lets YARN's own delay scheduling decide.
	LocalityWait time.Duration
	// KerberosPrincipal and KerberosKeytab log in to a Kerberized cluster
	// (--principal, --keytab); empty, the ticket cache kinit filled is
	// used.
	KerberosPrincipal, KerberosKeytab string
	// RenewTokens has the driver keep the executors' HDFS delegation
	// tokens alive on a Kerberized cluster (spindle.security.tokens.renew):
	// tokens of its own, renewed before each deadline and, with a keytab,
	// replaced by fresh ones before three quarters of their maximum
	// lifetime. Without it, executors use the tokens of the
	// ApplicationMaster's launch credentials, which YARN renews.
	RenewTokens bool
	// Binary is the spindle binary to stage; empty means this one.
	Binary string
	// BinaryCache is the directory on the cluster's default file system
	// where the binary is kept by content (spindle.yarn.binaryCache):
	// empty means /user/<user>/.spindle/cache, BinaryCacheOff stages it
	// with each application.
	BinaryCache string
	// BinaryCacheKeep is how many binaries the cache keeps; zero means 3.
	BinaryCacheKeep int
	// Out receives the lines a user should see (application id, tracking
	// URL); nil means stderr.
	Out      io.Writer
	LogLevel string
	Logger   *slog.Logger
	// Timeouts bound the gateway's calls to the cluster; zero fields take
	// DefaultTimeouts' values.
	Timeouts Timeouts
}

// Timeouts bound the calls a ClusterManager makes on the gateway.
type Timeouts struct {
	// Connect bounds the first call to the ResourceManager, which finds
	// out whether it answers at all.
	Connect time.Duration
	// RMCall bounds a query of the ResourceManager while the job runs
	// (the queue's room for a refused gang, the application's report).
	RMCall time.Duration
	// TokenFetch and TokenCancel bound getting and cancelling one HDFS
	// delegation token.
	TokenFetch, TokenCancel time.Duration
	// Close bounds ending the application as the ClusterManager closes;
	// AMCall, within it, the call asking the ApplicationMaster to finish.
	Close, AMCall time.Duration
	// Follow bounds each report a cluster-mode submit asks for while it
	// follows its job; Interrupt the stop of an interrupted cluster-mode
	// job (asking its ApplicationMaster, then killing the application).
	Follow, Interrupt time.Duration
}

// DefaultTimeouts returns the bounds a zero Timeouts field takes.
func DefaultTimeouts() Timeouts {
	return Timeouts{Connect: 30 * time.Second, RMCall: 10 * time.Second, TokenFetch: 30 * time.Second,
		TokenCancel: 10 * time.Second, Close: time.Minute, AMCall: 10 * time.Second,
		Follow: 15 * time.Second, Interrupt: 2 * time.Minute}
}

// withDefaults returns t with zero fields set to DefaultTimeouts'.
func (t Timeouts) withDefaults() Timeouts {
	d := DefaultTimeouts()
	t.Connect = cmp.Or(t.Connect, d.Connect)
	t.RMCall = cmp.Or(t.RMCall, d.RMCall)
	t.TokenFetch = cmp.Or(t.TokenFetch, d.TokenFetch)
	t.TokenCancel = cmp.Or(t.TokenCancel, d.TokenCancel)
	t.Close = cmp.Or(t.Close, d.Close)
	t.AMCall = cmp.Or(t.AMCall, d.AMCall)
	t.Follow = cmp.Or(t.Follow, d.Follow)
	t.Interrupt = cmp.Or(t.Interrupt, d.Interrupt)
	return t
}

// DefaultConfig returns the defaults.
func DefaultConfig() Config {
	return Config{AppName: "spindle-job", Queue: "default", MaxAttempts: 1, AMMemoryMB: 256, AMCores: 1,
		MemoryOverheadMB: 128, GangTimeout: 2 * time.Minute, LocalityWait: 3 * time.Second, RenewTokens: true,
		Timeouts: DefaultTimeouts()}
}

// Validate checks the configuration.
func (c Config) Validate() error {
	switch {
	case c.AMMemoryMB <= 0 || c.AMCores <= 0:
		return fmt.Errorf("%w: the ApplicationMaster needs memory and cores (got %d MiB, %d cores)", ErrConfig, c.AMMemoryMB, c.AMCores)
	case c.MemoryOverheadMB < 0:
		return fmt.Errorf("%w: negative memory overhead %d MiB", ErrConfig, c.MemoryOverheadMB)
	case c.GangTimeout <= 0:
		return fmt.Errorf("%w: gang timeout must be positive", ErrConfig)
	case c.LocalityWait < 0:
		return fmt.Errorf("%w: negative locality wait %v", ErrConfig, c.LocalityWait)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: max attempts must be at least 1", ErrConfig)
	case c.BinaryCache != "" && c.BinaryCache != BinaryCacheOff && !path.IsAbs(c.BinaryCache):
		return fmt.Errorf("%w: %s: %q is neither off nor an absolute path", ErrConfig, config.KeyYARNBinaryCache, c.BinaryCache)
	case c.BinaryCacheKeep < 0:
		return fmt.Errorf("%w: %s: %d is below 1", ErrConfig, config.KeyYARNBinaryCacheKeep, c.BinaryCacheKeep)
	}
	return nil
}

// ClusterManager runs a job's executors in YARN containers through
// Spindle's ApplicationMaster, with the driver in this process (client
// mode). The application is submitted on the first Request, when the
// executors are known; it is finished, and its staging directory removed,
// on Close, whatever happened before.
type ClusterManager struct {
	*gateway
	events chan driver.Event
	track  tracking

	mu        sync.Mutex
	appID     client.AppID
	reserved  *appReservation // the id JobID asked for, until submitted
	submitted bool
	stager    *stager
	tokens    map[string]hadooprpc.Token // HDFS delegation tokens by URI, cancelled at the end
	keeper    *tokenkeeper.Keeper        // the executors' own tokens, when the driver keeps them
	keeperOps *tokenkeeper.ResolverOps
	am        *amClient
	plan      Plan
	result    error
	started   map[string]string // executor id -> host

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
}

// What a client-mode YARN cluster manager offers the driver.
var (
	_ driver.ClusterManager    = (*ClusterManager)(nil)
	_ driver.RoomReporter      = (*ClusterManager)(nil)
	_ driver.TrackingURLSetter = (*ClusterManager)(nil)
	_ driver.ProgressReporter  = (*ClusterManager)(nil)
	_ driver.CredentialKeeper  = (*ClusterManager)(nil)
	_ driver.JobNamer          = (*ClusterManager)(nil)
)

// NewClusterManager reads the Hadoop configuration and checks that a
// ResourceManager answers. Configuration errors wrap ErrConfig; a
// ResourceManager that does not answer is ErrUnreachable, naming its
// addresses.
func NewClusterManager(ctx context.Context, cfg Config) (*ClusterManager, error) {
	g, err := newGateway(ctx, cfg)
	if err != nil {
		return nil, err
	}
	cm := &ClusterManager{gateway: g, events: make(chan driver.Event, 1024), started: map[string]string{}}
	cm.ctx, cm.cancel = context.WithCancel(context.Background())
	return cm, nil
}

// JobID asks the ResourceManager for the application's id before
// anything is submitted, so that the job is named after its YARN
// application from its first log line; the first Request submits the
// application under that id. An id that is never submitted costs YARN
// nothing.
func (c *ClusterManager) JobID(ctx context.Context) (string, error) {
	c.mu.Lock()
	res := c.reserved
	c.mu.Unlock()
	if res != nil {
		return res.id.String(), nil
	}
	r, err := c.reserveApp(ctx)
	if err != nil {
		return "", fmt.Errorf("ask the ResourceManager for an application id: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.reserved == nil {
		c.reserved = &r
	}
	return c.reserved.id.String(), nil
}

// AppID returns the application's id once submitted.
func (c *ClusterManager) AppID() (client.AppID, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appID, c.submitted
}

// Events delivers executor events until Close.
func (c *ClusterManager) Events() <-chan driver.Event { return c.events }

// SetResult records the job's outcome, which Close reports to YARN as the
// application's final status.
func (c *ClusterManager) SetResult(err error) {
	c.mu.Lock()
	c.result = err
	c.mu.Unlock()
}

// Request starts every executor in specs, all or nothing: the first call
// submits the application.
func (c *ClusterManager) Request(ctx context.Context, specs []driver.ExecutorSpec) error {
	c.mu.Lock()
	submitted := c.submitted
	c.mu.Unlock()
	if !submitted {
		if err := c.submit(ctx, specs); err != nil {
			return err
		}
	}
	c.mu.Lock()
	amc, plan, id := c.am, c.plan, c.appID
	c.mu.Unlock()
	if amc == nil {
		// The application was launched, but an earlier request stopped
		// waiting for its AM (an elastic job's wait for room ran out).
		var err error
		if amc, err = c.connectAM(ctx, id, plan); err != nil {
			return err
		}
	}
	// Secrets stay out of the API: the AM has the job's secret
	// environment from its credentials.
	send := make([]driver.ExecutorSpec, len(specs))
	for i, s := range specs {
		s.Env = stripEnv(s.Env, plan.Env)
		send[i] = s
	}
	if err := amc.do(ctx, http.MethodPost, "/v1/request", send, nil); err != nil {
		return fmt.Errorf("yarn application %s: %w%s", c.appIDString(), err, c.explainRoom(ctx, specs))
	}
	return nil
}

func (c *ClusterManager) appIDString() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.appID.String()
}

// explainRoom says what the queue could give, for a refused gang.
func (c *ClusterManager) explainRoom(ctx context.Context, specs []driver.ExecutorSpec) string {
	qctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), c.cfg.Timeouts.RMCall)
	defer cancel()
	q, err := c.rm.QueueInfo(qctx, c.cfg.Queue)
	if err != nil {
		return ""
	}
	need := 0
	for _, s := range specs {
		need += am.ContainerMB(s, c.cfg.MemoryOverheadMB)
	}
	return fmt.Sprintf(" (%s; the job needs %d MiB)", client.QueueRoom(q), need)
}

func stripEnv(env, shared map[string]string) map[string]string {
	out := map[string]string{}
	for k, v := range env {
		if sv, ok := shared[k]; !ok || sv != v {
			out[k] = v
		}
	}
	return out
}

// submit stages the binary, submits the application and waits for its
// ApplicationMaster to answer.
func (c *ClusterManager) submit(ctx context.Context, specs []driver.ExecutorSpec) error {
	check := func(maxMB int64) error {
		for _, s := range specs {
			if need := int64(am.ContainerMB(s, c.cfg.MemoryOverheadMB)); need > maxMB {
				return fmt.Errorf("%w: executor %s needs %d MiB (memory plus %d MiB overhead%s) but YARN's largest container is %d MiB (yarn.scheduler.maximum-allocation-mb)",
					driver.ErrConfig, s.ID, need, c.cfg.MemoryOverheadMB, am.SharedPhrase(s.SharedMemoryMB), maxMB)
			}
		}
		return nil
	}
	c.mu.Lock()
	reserved := c.reserved
	c.mu.Unlock()
	var (
		id  client.AppID
		st  *stager
		err error
	)
	if reserved != nil {
		id, st, err = c.stageApp(ctx, *reserved, check)
	} else {
		id, st, err = c.newApp(ctx, check)
	}
	c.mu.Lock()
	c.appID, c.stager = id, st
	c.mu.Unlock()
	if err != nil {
		return err
	}
	res, err := c.stageBinary(ctx, st)
	if err != nil {
		return err
	}
	// The job's secrets (its secret, its TLS bundle) go to the AM once,
	// in its credentials, and from there into every container's.
	shared := map[string]string{}
	if len(specs) > 0 {
		for _, k := range []string{envcontract.JobSecret, envcontract.JobTLS} {
			if v, ok := specs[0].Env[k]; ok {
				shared[k] = v
			}
		}
	}
	plan := Plan{
		AppID: id.String(), Spindle: res, Env: shared, AMSecret: newSecret(),
		GangTimeoutMS: c.cfg.GangTimeout.Milliseconds(), OverheadMB: c.cfg.MemoryOverheadMB,
		StagingURI: st.base, LogLevel: c.cfg.LogLevel, TrackingURL: c.trackingURL(),
		Racks: c.racks(ctx), LocalityWaitMS: c.cfg.LocalityWait.Milliseconds(),
	}
	if _, ok := shared[envcontract.JobTLS]; ok {
		// Job TLS: the driver's calls to the AM go over HTTPS too.
		if plan.AMTLS, err = newAMTLS(plan.AppID); err != nil {
			return err
		}
	}
	tokens := hadooprpc.NewCredentials()
	if c.sec.Kerberos {
		if err := c.addDelegationTokens(ctx, tokens, specs); err != nil {
			return err
		}
		if c.cfg.RenewTokens {
			if err := c.startKeeper(ctx, specs); err != nil {
				return err
			}
		}
	}
	if err := c.launch(ctx, id, plan, tokens.Tokens, nil); err != nil {
		return err
	}
	c.mu.Lock()
	c.submitted = true
	c.plan = plan
	c.mu.Unlock()
	_, err = c.connectAM(ctx, id, plan)
	return err
}

// connectAM waits for the application's AM to register and starts
// following its events.
func (c *ClusterManager) connectAM(ctx context.Context, id client.AppID, plan Plan) (*amClient, error) {
	report, err := c.waitAM(ctx, id)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(c.out, "yarn application %s running; tracking URL: %s\n", id, report.GetTrackingUrl())
	amc, err := newAMClient(plan, report.GetHost(), int(report.GetRpcPort()), 0)
	if err != nil {
		return nil, err
	}
	c.log.Info("following the ApplicationMaster", "app", id, "url", amc.base)
	c.mu.Lock()
	c.am = amc
	c.mu.Unlock()
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.watch(amc, id)
	}()
	return amc, nil
}

// waitAM polls the application's report until its AM has registered.
func (c *ClusterManager) waitAM(ctx context.Context, id client.AppID) (*pb.ApplicationReportProto, error) {
	last := pb.YarnApplicationStateProto(0)
	for {
		r, err := c.rm.Report(ctx, id)
		if err != nil {
			return nil, err
		}
		st := r.GetYarnApplicationState()
		if st != last {
			c.log.Info("application state", "app", id, "state", st)
			last = st
		}
		if client.IsFinal(st) {
			return nil, fmt.Errorf("%w: yarn application %s ended %s before its ApplicationMaster started: %s", ErrAppEnded, id, st, r.GetDiagnostics())
		}
		if st == pb.YarnApplicationStateProto_RUNNING && r.GetRpcPort() > 0 && r.GetHost() != "" && r.GetHost() != "N/A" {
			return r, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("wait for yarn application %s to start (state %s): %w", id, st, ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// watch forwards the AM's events until Close; when the AM stops answering
// and the application has ended, every started executor is lost.
func (c *ClusterManager) watch(amc *amClient, id client.AppID) {
	next, fails := 0, 0
	for c.ctx.Err() == nil {
		var evs amEvents
		err := amc.do(c.ctx, http.MethodGet, "/v1/events?after="+strconv.Itoa(next), nil, &evs)
		if err == nil {
			fails = 0
			next = evs.Next
			for _, ev := range evs.Events {
				c.mu.Lock()
				if ev.Kind == driver.ExecutorStarted {
					c.started[ev.ExecutorID] = ev.Host
				} else {
					delete(c.started, ev.ExecutorID)
				}
				c.mu.Unlock()
				c.send(ev)
			}
			if evs.Failed != "" {
				c.loseAll("the ApplicationMaster failed: " + evs.Failed)
				return
			}
			continue
		}
		if c.ctx.Err() != nil {
			return
		}
		fails++
		rctx, cancel := context.WithTimeout(c.ctx, c.cfg.Timeouts.RMCall)
		r, rerr := c.rm.Report(rctx, id)
		cancel()
		if rerr == nil && client.IsFinal(r.GetYarnApplicationState()) {
			c.loseAll(fmt.Sprintf("yarn application %s ended %s: %s", id, r.GetYarnApplicationState(), r.GetDiagnostics()))
			return
		}
		if fails > 30 {
			c.loseAll(fmt.Sprintf("the ApplicationMaster of %s stopped answering: %v", id, err))
			return
		}
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

func (c *ClusterManager) loseAll(msg string) {
	c.mu.Lock()
	lost := c.started
	c.started = map[string]string{}
	c.mu.Unlock()
	for id, host := range lost {
		c.send(driver.Event{ExecutorID: id, Kind: driver.ExecutorLost, Host: host, Message: msg, Time: time.Now()})
	}
}

func (c *ClusterManager) send(ev driver.Event) {
	select {
	case c.events <- ev:
	case <-c.ctx.Done():
	}
}

// Release stops the named executors (all when ids is empty).
func (c *ClusterManager) Release(ctx context.Context, ids []string) error {
	c.mu.Lock()
	amc := c.am
	c.mu.Unlock()
	if amc == nil {
		return nil
	}
	return amc.do(ctx, http.MethodPost, "/v1/release", amRelease{IDs: ids}, nil)
}

// ReportProgress passes the job's progress to the ApplicationMaster,
// which reports it to the ResourceManager on its next heartbeat.
func (c *ClusterManager) ReportProgress(ctx context.Context, done float64) error {
	c.mu.Lock()
	amc := c.am
	c.mu.Unlock()
	if amc == nil {
		return nil
	}
	return amc.do(ctx, http.MethodPost, "/v1/progress", amProgress{Done: done}, nil)
}

// Close finishes the application with the recorded result (killing it if
// its AM does not finish it), removes the staging directory, and closes the
// connections.
func (c *ClusterManager) Close() error {
	var err error
	c.once.Do(func() { err = c.close() })
	return err
}

func (c *ClusterManager) close() error {
	ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeouts.Close)
	defer cancel()
	c.mu.Lock()
	submitted, id, amc, st, result := c.submitted, c.appID, c.am, c.stager, c.result
	c.mu.Unlock()
	var errs []error
	if submitted {
		status, diag := "SUCCEEDED", ""
		switch {
		case errors.Is(result, driver.ErrInterrupted) || errors.Is(result, context.Canceled):
			status, diag = "KILLED", "interrupted on the gateway"
		case result != nil:
			status, diag = "FAILED", result.Error()
		}
		finished := false
		if amc != nil {
			fctx, fcancel := context.WithTimeout(ctx, c.cfg.Timeouts.AMCall)
			finished = amc.do(fctx, http.MethodPost, "/v1/finish", amFinish{Status: status, Diagnostics: diag}, nil) == nil
			fcancel()
		}
		switch {
		case finished:
			finished = c.waitFinal(ctx, id, 30*time.Second) != nil
		case amc != nil && status != "KILLED" && c.cfg.MaxAttempts > 1:
			// The AM is gone and YARN may be making another attempt,
			// which ends the application itself (FAILED: it cannot
			// rejoin this driver); give it a moment before killing.
			finished = c.waitFinal(ctx, id, 20*time.Second) != nil
		}
		if !finished {
			if _, err := c.rm.Kill(ctx, id, "spindle submit: "+status+" "+diag); err != nil {
				errs = append(errs, err)
			}
			c.waitFinal(ctx, id, 30*time.Second)
		}
	}
	c.cancel()
	c.wg.Wait()
	if st != nil {
		if err := st.removeAll(ctx); err != nil {
			errs = append(errs, fmt.Errorf("remove staging directory %s: %w", st.base, err))
		}
	}
	c.cancelDelegationTokens(ctx)
	c.stopKeeper(ctx)
	c.gateway.close()
	return errors.Join(errs...)
}
