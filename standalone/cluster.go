package standalone

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/driver/tokenkeeper"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// Errors a driver may see, wrapped with the masters' explanation.
var (
	// ErrNoRoom: the gang did not fit within its timeout.
	ErrNoRoom = apierr.ErrNoRoom
	// ErrOverCap: the gang would take the application past a cluster cap.
	ErrOverCap = apierr.ErrOverCap
	// ErrLaunch: a worker failed to start an executor.
	ErrLaunch = apierr.ErrLaunch
	// ErrAppEnded: the application ended (killed by an admin, or its
	// driver went silent).
	ErrAppEnded = apierr.ErrAppEnded
	// ErrNeverFits: an executor, or the whole gang, is larger than the
	// cluster's workers could ever hold.
	ErrNeverFits = apierr.ErrNeverFits
	// ErrUnknownApp: no application has that id or name.
	ErrUnknownApp = apierr.ErrUnknownApp
	// ErrConfig is wrapped by every configuration error.
	ErrConfig = errors.New("standalone: invalid configuration")
)

// ClientConfig says how a driver reaches the standalone masters.
type ClientConfig struct {
	// Masters are the masters' gRPC addresses (host:port); give all.
	Masters []string
	// Secret is the cluster secret; see ResolveSecret.
	Secret string
	// CertFile, KeyFile and CAFile enable mutual TLS when all are set.
	CertFile, KeyFile, CAFile string
	// AppName names the application in spindle status.
	AppName string
	// DriverHost is shown in status and in messages about the driver.
	DriverHost string
	// GangTimeout bounds the wait for room for a gang; a sooner deadline
	// on Request's context wins.
	GangTimeout time.Duration
	// HeartbeatInterval is how often the application is kept alive.
	HeartbeatInterval time.Duration
	// Console, when set, receives the executors' stdout and stderr lines,
	// fetched from their workers' files.
	Console *driver.Console
	Logger  *slog.Logger
	// HadoopConfDir (empty: $HADOOP_CONF_DIR) and, on a Kerberized
	// cluster, KerberosPrincipal and KerberosKeytab (empty: the ticket
	// cache): with RenewTokens (spindle.security.tokens.renew), the
	// driver obtains HDFS delegation tokens from its login for the
	// executors, which it hands to each as it registers, renews, and,
	// with a keytab, replaces with fresh ones for the life of the job.
	HadoopConfDir                     string
	KerberosPrincipal, KerberosKeytab string
	RenewTokens                       bool
	// PlaintextSecrets lets the job's secrets reach masters on other
	// hosts without cluster TLS, and delegation tokens reach executors
	// there without job TLS (spindle.cluster.plaintextSecrets).
	PlaintextSecrets bool
	// JobTLS says the driver-executor link is mutual TLS
	// (spindle.job.tls.enabled), over which executors get delegation
	// tokens when they register.
	JobTLS bool
	// Timeouts bound the driver's calls to the cluster; zero fields take
	// DefaultClientTimeouts' values.
	Timeouts ClientTimeouts
}

// ClientTimeouts bound the calls a standalone ClusterManager makes.
type ClientTimeouts struct {
	// Register bounds registering the application: masters that cannot
	// be reached (an unresolvable name, no leader) fail the submit,
	// naming them, instead of holding it forever.
	Register time.Duration
	// Release bounds giving back what the masters placed of a gang whose
	// request was abandoned.
	Release time.Duration
	// LastOutput bounds waiting for released executors' last output;
	// LogRead each read of an executor's output from its worker.
	LastOutput, LogRead time.Duration
	// Close bounds ending the application.
	Close time.Duration
}

// DefaultClientTimeouts returns the bounds a zero ClientTimeouts field
// takes.
func DefaultClientTimeouts() ClientTimeouts {
	return ClientTimeouts{Register: 30 * time.Second, Release: 30 * time.Second, LastOutput: 5 * time.Second,
		LogRead: 5 * time.Second, Close: 15 * time.Second}
}

// withDefaults returns t with zero fields set to DefaultClientTimeouts'.
func (t ClientTimeouts) withDefaults() ClientTimeouts {
	d := DefaultClientTimeouts()
	t.Register = cmp.Or(t.Register, d.Register)
	t.Release = cmp.Or(t.Release, d.Release)
	t.LastOutput = cmp.Or(t.LastOutput, d.LastOutput)
	t.LogRead = cmp.Or(t.LogRead, d.LogRead)
	t.Close = cmp.Or(t.Close, d.Close)
	return t
}

// DefaultClientConfig returns the defaults.
func DefaultClientConfig() ClientConfig {
	return ClientConfig{AppName: "spindle-job", GangTimeout: 2 * time.Minute, HeartbeatInterval: time.Second,
		Timeouts: DefaultClientTimeouts()}
}

// ResolveSecret finds the cluster secret: in file (when set), else value,
// else $SPINDLE_CLUSTER_SECRET.
func ResolveSecret(file, value string) (string, error) {
	return secure.ResolveSecret(secure.SecretSources{File: file, Value: value})
}

// ClusterManager gets executors from the standalone masters for one job.
type ClusterManager struct {
	cfg    ClientConfig
	client *client.Client
	appID  string
	logger *slog.Logger
	events chan driver.Event

	ctx    context.Context
	cancel context.CancelFunc
	g      *errgroup.Group

	mu       sync.Mutex
	known    map[string]pb.ExecutorState
	workerOf map[string]string // executor id → the worker it was placed on

	tailMu      sync.Mutex
	tails       map[string]*tailer
	closing     bool
	tailWG      sync.WaitGroup
	workerConns map[string]*grpc.ClientConn

	closeOnce sync.Once
	closeErr  error

	resultMu  sync.Mutex
	result    error // how the job ended (SetResult)
	resultSet bool

	input      atomic.Pointer[string]   // ShowInput's endpoint
	localizing atomic.Pointer[[]string] // ShowLocalizing's ranks, sent with each heartbeat

	tokMu      sync.Mutex
	tokStarted bool
	tokens     *tokenkeeper.Job // the executors' delegation tokens, on a Kerberized cluster
}

// What a standalone cluster manager offers the driver.
var (
	_ driver.ClusterManager   = (*ClusterManager)(nil)
	_ driver.RoomReporter     = (*ClusterManager)(nil)
	_ driver.OutputDeliverer  = (*ClusterManager)(nil)
	_ driver.InputShower      = (*ClusterManager)(nil)
	_ driver.LocalizingShower = (*ClusterManager)(nil)
	_ driver.NodeNamer        = (*ClusterManager)(nil)
	_ driver.CredentialKeeper = (*ClusterManager)(nil)
	_ driver.JobNamer         = (*ClusterManager)(nil)
)

// NewClusterManager registers an application with the masters and starts
// keeping it alive and watching its executors.
func NewClusterManager(ctx context.Context, cfg ClientConfig) (*ClusterManager, error) {
	def := DefaultClientConfig()
	cfg.Timeouts = cfg.Timeouts.withDefaults()
	if cfg.AppName == "" {
		cfg.AppName = def.AppName
	}
	if cfg.GangTimeout <= 0 {
		cfg.GangTimeout = def.GangTimeout
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = def.HeartbeatInterval
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	if cfg.DriverHost == "" {
		cfg.DriverHost, _ = os.Hostname()
	}
	if len(cfg.Masters) == 0 {
		return nil, fmt.Errorf("%w: no masters; use --master spindle://host:port,host:port", ErrConfig)
	}
	if err := checkSecretsChannel(cfg, cfg.Logger); err != nil {
		return nil, err
	}
	cl, err := client.New(client.Config{
		Masters: cfg.Masters, Secret: cfg.Secret,
		TLS:    secure.TLSFiles{CertFile: cfg.CertFile, KeyFile: cfg.KeyFile, CAFile: cfg.CAFile},
		Logger: cfg.Logger,
		// Masters that all refuse connections are down or misnamed: say
		// so at once rather than retry in silence.
		FailFast: true,
	})
	if err != nil {
		return nil, err
	}
	var appID string
	reqID := newID()
	cfg.Logger.Info("registering with the standalone masters", "masters", cfg.Masters)
	rctx, cancel := context.WithTimeout(ctx, cfg.Timeouts.Register)
	defer cancel()
	err = cl.Call(rctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RegisterApp(ctx, &pb.RegisterAppRequest{Name: cfg.AppName, DriverHost: cfg.DriverHost, RequestId: reqID})
		if err == nil {
			appID = resp.GetAppId()
		}
		return err
	})
	if err != nil {
		_ = cl.Close()
		return nil, fmt.Errorf("register application with the standalone masters %v: %w", cfg.Masters, err)
	}
	c := &ClusterManager{
		cfg: cfg, client: cl, appID: appID,
		logger: cfg.Logger.With("component", "standalone", "app", appID),
		events: make(chan driver.Event, 1024),
		known:  map[string]pb.ExecutorState{}, workerOf: map[string]string{},
		tails: map[string]*tailer{}, workerConns: map[string]*grpc.ClientConn{},
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.g, _ = errgroup.WithContext(c.ctx)
	c.g.Go(func() error { c.heartbeats(); return nil })
	c.g.Go(func() error { c.watch(); return nil })
	c.logger.Info("registered with the standalone masters", "masters", cfg.Masters)
	return c, nil
}

func newID() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// AppID returns the application's id on the cluster.
func (c *ClusterManager) AppID() string { return c.appID }

// JobID returns the application's id, which the master gave at
// registration: the job carries it as its own.
func (c *ClusterManager) JobID(context.Context) (string, error) { return c.appID, nil }

// ShowInput records where the job takes pushed input (a flight-put:
// input's endpoint): spindle status shows it once executors are requested.
func (c *ClusterManager) ShowInput(uri string) { c.input.Store(&uri) }

// ShowLocalizing records the ranks still localizing their files: the
// next heartbeat tells the leader, and spindle status shows them.
func (c *ClusterManager) ShowLocalizing(lines []string) { c.localizing.Store(&lines) }

func (c *ClusterManager) localizingRanks() []string {
	if p := c.localizing.Load(); p != nil {
		return *p
	}
	return nil
}

func (c *ClusterManager) inputURI() string {
	if p := c.input.Load(); p != nil {
		return *p
	}
	return ""
}

// Request places and launches every executor in specs, all or nothing.
func (c *ClusterManager) Request(ctx context.Context, specs []driver.ExecutorSpec) error {
	if len(specs) == 0 {
		return nil
	}
	if err := c.startTokens(ctx, specs); err != nil {
		return err
	}
	timeout := c.cfg.GangTimeout
	if dl, ok := ctx.Deadline(); ok {
		// Leave time for the masters' explanation to arrive before ctx ends.
		left := time.Until(dl)
		if left -= min(time.Second, left/10); left < timeout {
			timeout = left
		}
	}
	req := &pb.RequestExecutorsRequest{AppId: c.appID, RequestId: newID(), TimeoutMs: max(timeout.Milliseconds(), 1), Input: c.inputURI()}
	ids := make([]string, len(specs))
	for i, s := range specs {
		ids[i] = s.ID
		req.Executors = append(req.Executors, &pb.ExecutorRequest{
			Id: s.ID, Role: string(s.Role), Args: s.Args, Env: s.Env,
			Cores: int32(s.Cores), MemoryMb: int64(s.MemoryMB), Gpus: int32(s.GPUs),
			PreferredHosts: s.PreferredHosts, ExcludedHosts: s.ExcludedHosts,
		})
	}
	start := time.Now()
	wctx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); c.sayWaiting(wctx) }()
	err := c.client.Call(ctx, true, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RequestExecutors(ctx, req)
		if err == nil {
			c.mu.Lock()
			for _, e := range resp.GetExecutors() {
				c.workerOf[e.GetId()] = e.GetWorkerId()
			}
			c.mu.Unlock()
		}
		return err
	})
	stopWatch()
	<-watched
	if err != nil {
		if ctx.Err() != nil {
			// The masters may have placed part of the gang as ctx ended.
			rctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeouts.Release)
			if rerr := c.Release(rctx, ids); rerr != nil {
				c.logger.Warn("release executors of an abandoned request", "err", rerr)
			}
			cancel()
		}
		return fmt.Errorf("standalone masters: %w", err)
	}
	c.logger.Info("executors running", "count", len(specs), "after", time.Since(start).Round(time.Millisecond))
	return nil
}

// raftLeader is how a master's status names the Raft leader's role.
const raftLeader = "Leader"

// Room returns how many more executors of spec's shape the cluster's
// alive workers have room for now, leaving out spec.ExcludedHosts. Only
// the leader's answer counts: any master serves ClusterStatus from its
// own replica, and a follower's may lag by seconds on a loaded machine,
// or replay old states after a restart, showing room long gone (a lost
// worker still alive, executors that ended before the gang now running
// was placed): an elastic job asked to grow on such a view stops its
// generation for nothing.
func (c *ClusterManager) Room(ctx context.Context, spec driver.ExecutorSpec) (int, error) {
	var cs *pb.ClusterStatusResponse
	err := c.client.Call(ctx, true, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
		if err != nil {
			return err
		}
		if by := resp.GetServedBy(); by.GetState() != raftLeader {
			return fmt.Errorf("%w: master %s (%s) answered from its replica, which may lag", apierr.ErrNotLeader, by.GetId(), by.GetState())
		}
		cs = resp
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cluster status: %w", err)
	}
	room := 0
	for _, w := range cs.GetWorkers() {
		if !w.GetAlive() || slices.Contains(spec.ExcludedHosts, w.GetId()) || slices.Contains(spec.ExcludedHosts, w.GetHost()) {
			continue
		}
		n := int(w.GetCores()-w.GetUsedCores()) / max(spec.Cores, 1)
		n = min(n, int((w.GetMemoryMb()-w.GetUsedMemoryMb())/int64(max(spec.MemoryMB, 1))))
		if spec.GPUs > 0 {
			n = min(n, int(w.GetGpus()-w.GetUsedGpus())/spec.GPUs)
		}
		room += max(n, 0)
	}
	return room, nil
}

// NodeOf returns the worker an executor was placed on, the name
// ExecutorSpec.ExcludedHosts takes ("" when unknown).
func (c *ClusterManager) NodeOf(executorID string) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.workerOf[executorID]
}

// Release stops the named executors (all when ids is empty) and waits
// until they are gone.
func (c *ClusterManager) Release(ctx context.Context, ids []string) error {
	var gone []*pb.ExecutorInfo
	err := c.client.Call(ctx, true, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.ReleaseExecutors(ctx, &pb.ReleaseExecutorsRequest{AppId: c.appID, ExecutorIds: ids, Reason: "released by the driver"})
		gone = resp.GetExecutors()
		return err
	})
	if err != nil {
		return fmt.Errorf("release executors of %s: %w", c.appID, err)
	}
	// The watch may not have shown these executors yet (a short job, a
	// lagging replica): make sure their output is fetched to the end.
	for _, e := range gone {
		c.startTail(e, nil)
		if progress(e.GetState()) == 3 {
			c.endTail(e.GetId())
		}
	}
	// Their last output is printed before the release is over.
	wctx, cancel := context.WithTimeout(ctx, c.cfg.Timeouts.LastOutput)
	defer cancel()
	c.waitTails(wctx, ids)
	return nil
}

// Events delivers executor events until Close. The channel is not closed.
func (c *ClusterManager) Events() <-chan driver.Event { return c.events }

// Close ends the application; the masters stop whatever it still runs.
func (c *ClusterManager) Close() error {
	c.closeOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), c.cfg.Timeouts.Close)
		defer cancel()
		final, msg := c.outcome()
		err := c.client.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
			_, err := m.FinishApp(ctx, &pb.FinishAppRequest{AppId: c.appID, Message: msg, FinalStatus: final})
			return err
		})
		if err != nil {
			c.closeErr = fmt.Errorf("finish application %s: %w", c.appID, err)
		}
		c.tailMu.Lock()
		c.closing = true
		c.tailMu.Unlock()
		c.cancel()
		_ = c.g.Wait()
		c.tailWG.Wait()
		for _, conn := range c.workerConns {
			_ = conn.Close()
		}
		if err := c.client.Close(); err != nil && c.closeErr == nil {
			c.closeErr = err
		}
		c.tokMu.Lock()
		tokens := c.tokens
		c.tokMu.Unlock()
		if tokens != nil {
			tokens.Close()
		}
	})
	return c.closeErr
}

// startTokens obtains the executors' delegation tokens before the first
// executors start, on a Kerberized cluster: the driver hands them out as
// executors register (CredentialKeeper), never on a command line or in an
// environment.
func (c *ClusterManager) startTokens(ctx context.Context, specs []driver.ExecutorSpec) error {
	c.tokMu.Lock()
	defer c.tokMu.Unlock()
	if c.tokStarted || !c.cfg.RenewTokens {
		return nil
	}
	c.tokStarted = true
	var texts []string
	for _, s := range specs {
		texts = append(texts, s.Args...)
		for k, v := range s.Env {
			if !strings.Contains(strings.ToUpper(k), "SECRET") {
				texts = append(texts, v)
			}
		}
	}
	j, err := tokenkeeper.StartJob(ctx, tokenkeeper.JobConfig{HadoopConfDir: c.cfg.HadoopConfDir,
		Principal: c.cfg.KerberosPrincipal, Keytab: c.cfg.KerberosKeytab, Texts: texts, Logger: c.logger})
	if err != nil {
		return fmt.Errorf("%w: %v", driver.ErrConfig, err)
	}
	c.tokens = j
	return nil
}

// ExecutorCredentials returns the newest delegation tokens for executors,
// or nil when the cluster is not Kerberized (driver.CredentialKeeper).
func (c *ClusterManager) ExecutorCredentials() *driverpb.Credentials {
	c.tokMu.Lock()
	j := c.tokens
	c.tokMu.Unlock()
	if j == nil {
		return nil
	}
	return j.ExecutorCredentials()
}

// CredentialsInUse says every running executor uses generation
// (driver.CredentialKeeper).
func (c *ClusterManager) CredentialsInUse(generation int64) {
	c.tokMu.Lock()
	j := c.tokens
	c.tokMu.Unlock()
	if j != nil {
		j.CredentialsInUse(generation)
	}
}

// heartbeats keeps the application alive until Close.
func (c *ClusterManager) heartbeats() {
	t := time.NewTicker(c.cfg.HeartbeatInterval)
	defer t.Stop()
	failing, ended := false, false
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(c.ctx, 3*c.cfg.HeartbeatInterval+2*time.Second)
		var state pb.AppState
		err := c.client.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
			resp, err := m.AppHeartbeat(ctx, &pb.AppHeartbeatRequest{AppId: c.appID, Localizing: c.localizingRanks()})
			state = resp.GetState()
			return err
		})
		cancel()
		switch {
		case err != nil && c.ctx.Err() == nil && !failing:
			c.logger.Warn("cannot reach the standalone masters; executors keep running", "err", err)
			failing = true
		case err == nil && failing:
			c.logger.Info("in contact with the standalone masters again")
			failing = false
		}
		if err == nil && state != pb.AppState_APP_STATE_RUNNING && !ended {
			c.logger.Warn("the masters ended the application", "state", client.AppStateName(state))
			ended = true
		}
	}
}

// watch follows the application's state from any master and turns changes
// of its executors into events.
func (c *ClusterManager) watch() {
	for c.ctx.Err() == nil {
		err := c.client.Call(c.ctx, true, func(ctx context.Context, m pb.MasterClient) error {
			stream, err := m.WatchApp(ctx, &pb.WatchAppRequest{AppId: c.appID})
			if err != nil {
				return err
			}
			for {
				snap, err := stream.Recv()
				if err != nil {
					return err
				}
				if !c.observe(snap) {
					return nil
				}
			}
		})
		if c.ctx.Err() != nil {
			return
		}
		c.logger.Debug("watch of the application ended; watching again", "err", err)
		select {
		case <-c.ctx.Done():
			return
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// progress orders executor states: a replica that lags behind never
// moves an executor back.
func progress(s pb.ExecutorState) int {
	switch s {
	case pb.ExecutorState_EXECUTOR_STATE_PLACED:
		return 1
	case pb.ExecutorState_EXECUTOR_STATE_RUNNING:
		return 2
	case pb.ExecutorState_EXECUTOR_STATE_EXITED, pb.ExecutorState_EXECUTOR_STATE_LOST:
		return 3
	}
	return 0
}

// observe emits events for executors whose state moved forward, and
// follows their output. It returns false once the manager is closing.
func (c *ClusterManager) observe(snap *pb.AppSnapshot) bool {
	var evs []driver.Event
	c.mu.Lock()
	// Ended by someone else (spindle kill, or the masters gave up on this
	// driver): every executor still running is about to be stopped. Say
	// why before the stop itself is reported as a bare signal.
	if st := snap.GetApp().GetState(); st == pb.AppState_APP_STATE_KILLED || st == pb.AppState_APP_STATE_ABANDONED {
		for _, e := range snap.GetExecutors() {
			if progress(c.known[e.GetId()]) == 3 || progress(e.GetState()) == 3 {
				continue
			}
			c.known[e.GetId()] = pb.ExecutorState_EXECUTOR_STATE_LOST
			evs = append(evs, driver.Event{ExecutorID: e.GetId(), Kind: driver.ExecutorLost, Host: e.GetHost(),
				Message: fmt.Sprintf("application %s %s", snap.GetApp().GetId(), snap.GetApp().GetMessage()), Time: time.Now()})
		}
	}
	for _, e := range snap.GetExecutors() {
		// Output is followed from the first sign of life to the real end.
		c.startTail(e, snap.GetWorkers())
		if progress(e.GetState()) == 3 {
			c.endTail(e.GetId())
		}
		prev := c.known[e.GetId()]
		if progress(e.GetState()) <= progress(prev) {
			continue
		}
		c.known[e.GetId()] = e.GetState()
		ev := driver.Event{ExecutorID: e.GetId(), Host: e.GetHost(), Node: e.GetWorkerId(), Message: e.GetMessage(), Time: time.UnixMilli(e.GetUpdatedUnixMs())}
		switch e.GetState() {
		case pb.ExecutorState_EXECUTOR_STATE_RUNNING:
			ev.Kind = driver.ExecutorStarted
		case pb.ExecutorState_EXECUTOR_STATE_EXITED:
			ev.Kind, ev.ExitCode = driver.ExecutorExited, int(e.GetExitCode())
		case pb.ExecutorState_EXECUTOR_STATE_LOST:
			// Its worker left or went silent: the cluster's doing, not
			// the job's (an application killed by an admin or abandoned
			// is reported above and ends the job all the same).
			ev.Kind, ev.Blameless = driver.ExecutorLost, true
		default:
			continue
		}
		evs = append(evs, ev)
	}
	c.mu.Unlock()
	for _, ev := range evs {
		select {
		case c.events <- ev:
		case <-c.ctx.Done():
			return false
		}
	}
	return true
}
