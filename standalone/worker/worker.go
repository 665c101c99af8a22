package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/internal/rpc"
	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// Worker is the node agent.
type Worker struct {
	cfg         Config
	id          string
	host        string
	addr        string // advertised gRPC address
	incarnation string
	logger      *slog.Logger
	cgroups     *cgroups

	masters *client.Client
	lis     net.Listener
	grpc    *grpc.Server

	mu    sync.Mutex
	procs map[string]*proc // by app/executor
	// ended records when each application ended, for directory cleanup.
	ended    map[string]time.Time
	stopping bool

	kick    chan struct{}
	reapers sync.WaitGroup
}

// New binds the worker's gRPC service and prepares its work directory and
// cgroups; Run registers with the masters and serves.
func New(cfg Config) (*Worker, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	cfg.OutputWaitDelay = cmp.Or(cfg.OutputWaitDelay, DefaultOutputWaitDelay)
	cfg.FinalHeartbeatTimeout = cmp.Or(cfg.FinalHeartbeatTimeout, DefaultFinalHeartbeatTimeout)
	w := &Worker{
		cfg:   cfg,
		procs: map[string]*proc{},
		ended: map[string]time.Time{},
		kick:  make(chan struct{}, 1),
	}
	inc := make([]byte, 8)
	if _, err := rand.Read(inc); err != nil {
		return nil, err
	}
	w.incarnation = hex.EncodeToString(inc)

	var err error
	w.lis = cfg.Listener
	if w.lis == nil {
		if w.lis, err = net.Listen("tcp", cfg.Addr); err != nil {
			return nil, fmt.Errorf("listen on %s: %w", cfg.Addr, err)
		}
	}
	_, port, _ := net.SplitHostPort(w.lis.Addr().String())
	w.host = cfg.AdvertiseHost
	if w.host == "" {
		h, _, _ := net.SplitHostPort(w.lis.Addr().String())
		if ip := net.ParseIP(h); ip == nil || ip.IsUnspecified() {
			if h, err = os.Hostname(); err != nil {
				w.closeListener()
				return nil, fmt.Errorf("find this machine's name: %w (set --advertise-host)", err)
			}
		}
		w.host = h
	}
	w.addr = net.JoinHostPort(w.host, port)
	w.id = cfg.ID
	if w.id == "" {
		w.id = sanitize(w.host + "-" + port)
	}
	w.logger = cfg.Logger.With("component", "worker", "worker", w.id)

	if err := os.MkdirAll(cfg.WorkDir, 0o700); err != nil {
		w.closeListener()
		return nil, fmt.Errorf("create work directory: %w", err)
	}
	w.masters, err = client.New(client.Config{Masters: cfg.Masters, Secret: cfg.Secret, TLS: cfg.TLS,
		AttemptTimeout: max(2*cfg.HeartbeatInterval, 2*time.Second), Logger: w.logger})
	if err != nil {
		w.closeListener()
		return nil, err
	}
	w.grpc = rpc.NewServer(rpc.ServerConfig{Logger: w.logger, Codes: apierr.Codes, Otherwise: codes.Internal,
		Options: w.masters.Credentials().ServerOptionsAs(secure.WorkerAudience(w.addr))})
	pb.RegisterWorkerServer(w.grpc, &service{w: w})

	// Every job runs as this process's user (see docs/standalone.md).
	w.logger.Warn("single-tenant worker: every job runs as this worker's user and can read other jobs' files and tokens and the cluster secret; share the cluster only among users who may see each other's jobs",
		"user", currentUser())
	switch {
	case cfg.DisableCgroups:
		w.logger.Warn("cgroups disabled by configuration; executors run without CPU and memory limits")
	default:
		cg, err := setupCgroups(cfg.CgroupRoot, cfg.CgroupParent, w.id)
		if err != nil {
			w.logger.Warn("executors run without CPU and memory limits: cgroups unavailable", "reason", err.Error())
		} else {
			w.cgroups = cg
			w.logger.Info("executors run in cgroups with CPU and memory limits", "cgroup", cg.base)
		}
	}
	return w, nil
}

func (w *Worker) closeListener() {
	if w.cfg.Listener == nil && w.lis != nil {
		_ = w.lis.Close()
	}
}

// sanitize makes s usable as an id and directory name.
func sanitize(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '-'
		}
	}
	return string(b)
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.id }

// Addr returns the advertised address of the worker's gRPC service.
func (w *Worker) Addr() string { return w.addr }

// WorkDir returns the directory holding executors' directories.
func (w *Worker) WorkDir() string { return w.cfg.WorkDir }

// CgroupsEnabled says whether executors get cgroup limits.
func (w *Worker) CgroupsEnabled() bool { return w.cgroups != nil }

// Run registers with the masters, heartbeats and serves launches until ctx
// ends; then it stops every executor and returns.
func (w *Worker) Run(ctx context.Context) error {
	w.logger.Info("worker running", "addr", w.addr, "cores", w.cfg.Cores, "memory_mb", w.cfg.MemoryMB,
		"gpus", w.cfg.GPUs, "work_dir", w.cfg.WorkDir, "masters", w.cfg.Masters)
	g, gctx := errgroup.WithContext(ctx)
	g.Go(func() error {
		if err := w.grpc.Serve(w.lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("serve worker API on %s: %w", w.addr, err)
		}
		return nil
	})
	g.Go(func() error { return w.masterLoop(gctx) })
	g.Go(func() error { w.cleanupLoop(gctx); return nil })
	<-gctx.Done()
	w.shutdown()
	return g.Wait()
}

// shutdown stops every executor and the gRPC service, and tells the
// masters how the executors ended.
func (w *Worker) shutdown() {
	w.mu.Lock()
	w.stopping = true
	var all []*proc
	for _, p := range w.procs {
		if !p.exited && p.cmd != nil {
			all = append(all, p)
		}
	}
	w.mu.Unlock()
	if len(all) > 0 {
		w.logger.Info("stopping executors", "count", len(all))
		ctx, cancel := context.WithTimeout(context.Background(), w.cfg.StopGrace+5*time.Second)
		w.stopProcs(ctx, all, w.cfg.StopGrace, fmt.Sprintf("worker %s shut down", w.id))
		cancel()
	}
	w.reapers.Wait()
	ctx, cancel := context.WithTimeout(context.Background(), w.cfg.FinalHeartbeatTimeout)
	if _, err := w.heartbeat(ctx); err != nil {
		w.logger.Debug("final heartbeat", "err", err)
	}
	cancel()
	w.grpc.Stop()
}

// Close releases the listener and the masters' client.
func (w *Worker) Close() error {
	w.grpc.Stop()
	w.closeListener()
	return w.masters.Close()
}

func (w *Worker) kickHeartbeat() {
	select {
	case w.kick <- struct{}{}:
	default:
	}
}

// masterLoop registers, then heartbeats; it registers again whenever a
// master asks. Losing the masters changes nothing for running executors.
// It returns ErrRefused when the masters refuse the worker itself: a
// wrong cluster secret at first contact, or an id another running worker
// holds.
func (w *Worker) masterLoop(ctx context.Context) error {
	t := time.NewTicker(w.cfg.HeartbeatInterval)
	defer t.Stop()
	registered, connected, everRegistered := false, true, false
	for {
		var err error
		if !registered {
			if err = w.register(ctx); err == nil {
				registered, everRegistered = true, true
			} else if refusal(err, everRegistered) {
				return fmt.Errorf("%w: %v", ErrRefused, err)
			}
		} else {
			var again bool
			if again, err = w.heartbeat(ctx); err == nil && again {
				w.logger.Info("masters asked the worker to register again")
				registered = false
				continue
			}
		}
		switch {
		case err != nil && ctx.Err() == nil && connected:
			w.logger.Warn("lost contact with the masters; executors keep running", "err", err)
			connected = false
		case err == nil && !connected:
			w.logger.Info("in contact with the masters again")
			connected = true
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		case <-w.kick:
		}
	}
}

// ErrRefused means the masters refused this worker: it cannot serve the
// cluster as configured (exit 2).
var ErrRefused = errors.New("worker refused by the masters")

// refusal says whether a registration error means the worker must stop:
// a duplicate id always, an authentication refusal before the worker was
// ever registered (afterwards the masters may just be restarting with new
// settings, and the executors keep running).
func refusal(err error, everRegistered bool) bool {
	return errors.Is(err, apierr.ErrDuplicateID) || (!everRegistered && isUnauthenticated(err))
}

func isUnauthenticated(err error) bool {
	for e := err; e != nil; e = errors.Unwrap(e) {
		if s, ok := status.FromError(e); ok && s.Code() == codes.Unauthenticated {
			return true
		}
	}
	return false
}

// reports lists the executors for the masters.
func (w *Worker) reports() []*pb.WorkerExecutor {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]*pb.WorkerExecutor, 0, len(w.procs))
	for _, p := range w.procs {
		out = append(out, p.report())
	}
	sort.Slice(out, func(i, j int) bool {
		return out[i].GetAppId()+"/"+out[i].GetExecutorId() < out[j].GetAppId()+"/"+out[j].GetExecutorId()
	})
	return out
}

// report must be called with the worker's lock held.
func (p *proc) report() *pb.WorkerExecutor {
	return &pb.WorkerExecutor{AppId: p.app, ExecutorId: p.id, Running: !p.exited,
		ExitCode: int32(p.exitCode), Message: p.message, Pid: int32(p.pid)}
}

func (w *Worker) register(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 3*max(w.cfg.HeartbeatInterval, time.Second))
	defer cancel()
	req := &pb.RegisterWorkerRequest{
		Id: w.id, Addr: w.addr, Host: w.host,
		Cores: int32(w.cfg.Cores), MemoryMb: w.cfg.MemoryMB, Gpus: int32(w.cfg.GPUs),
		Incarnation: w.incarnation, Executors: w.reports(),
	}
	var leader string
	err := w.masters.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.RegisterWorker(ctx, req)
		if err == nil {
			leader = resp.GetLeaderId()
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("register with the masters: %w", err)
	}
	w.logger.Info("registered with the masters", "leader", leader)
	return nil
}

// heartbeat reports the executors; it returns true when the masters want
// the worker to register again.
func (w *Worker) heartbeat(ctx context.Context) (bool, error) {
	ctx, cancel := context.WithTimeout(ctx, 3*max(w.cfg.HeartbeatInterval, time.Second))
	defer cancel()
	req := &pb.WorkerHeartbeatRequest{Id: w.id, Incarnation: w.incarnation, Executors: w.reports()}
	var resp *pb.WorkerHeartbeatResponse
	err := w.masters.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		r, err := m.WorkerHeartbeat(ctx, req)
		resp = r
		return err
	})
	if err != nil {
		return false, fmt.Errorf("heartbeat: %w", err)
	}
	if len(resp.GetForget()) > 0 {
		w.mu.Lock()
		for _, k := range resp.GetForget() {
			if p, ok := w.procs[k]; ok && p.exited {
				delete(w.procs, k)
			}
		}
		w.mu.Unlock()
	}
	return resp.GetReregister(), nil
}

// stopProcs stops processes: SIGTERM, then SIGKILL after grace.
func (w *Worker) stopProcs(ctx context.Context, ps []*proc, grace time.Duration, reason string) {
	w.mu.Lock()
	for _, p := range ps {
		if p.stopReason == "" {
			p.stopReason = reason
		}
	}
	w.mu.Unlock()
	for _, p := range ps {
		// Say why, for the executor to tell its driver: a signal carries
		// no reason.
		_ = os.WriteFile(filepath.Join(p.dir, StopReasonFile), []byte(p.stopReason), 0o600)
		if err := p.signal(sigTerm); err != nil {
			w.logger.Warn("stop executor", "err", err)
		}
	}
	deadline := time.NewTimer(grace)
	defer deadline.Stop()
	for _, p := range ps {
		select {
		case <-p.done:
			continue
		case <-deadline.C:
		case <-ctx.Done():
		}
		// Out of time: kill the rest.
		for _, q := range ps {
			select {
			case <-q.done:
			default:
				w.logger.Warn("executor ignored SIGTERM; killing it", "app", q.app, "executor", q.id, "grace", grace)
				_ = q.signal(sigKill)
			}
		}
		break
	}
	for _, p := range ps {
		select {
		case <-p.done:
		case <-ctx.Done():
			return
		}
	}
}

// cleanupLoop removes directories of applications that ended more than
// CleanupDelay ago, and leftovers of earlier worker runs.
func (w *Worker) cleanupLoop(ctx context.Context) {
	w.removeStale()
	every := min(max(w.cfg.CleanupDelay/10, 100*time.Millisecond), time.Minute)
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			w.cleanupEnded()
		}
	}
}

// cleanupEnded removes the directories of applications that ended long
// enough ago and have nothing running.
func (w *Worker) cleanupEnded() {
	now := time.Now()
	var doomed []string
	w.mu.Lock()
	for app, at := range w.ended {
		if now.Sub(at) < w.cfg.CleanupDelay {
			continue
		}
		busy := false
		for _, p := range w.procs {
			if p.app == app && !p.exited {
				busy = true
			}
		}
		if !busy {
			doomed = append(doomed, app)
			delete(w.ended, app)
		}
	}
	w.mu.Unlock()
	for _, app := range doomed {
		if err := os.RemoveAll(filepath.Join(w.cfg.WorkDir, app)); err != nil {
			w.logger.Warn("remove application directory", "app", app, "err", err)
			continue
		}
		w.logger.Info("removed directory of ended application", "app", app)
	}
}

// removeStale removes application directories left by an earlier run of
// the worker that are older than CleanupDelay.
func (w *Worker) removeStale() {
	entries, err := os.ReadDir(w.cfg.WorkDir)
	if err != nil {
		return
	}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil || !e.IsDir() || time.Since(info.ModTime()) < w.cfg.CleanupDelay {
			continue
		}
		if err := os.RemoveAll(filepath.Join(w.cfg.WorkDir, e.Name())); err == nil {
			w.logger.Info("removed stale application directory", "dir", e.Name())
		}
	}
}

// currentUser names the user jobs run as, for the single-tenant warning.
func currentUser() string {
	if u, err := user.Current(); err == nil {
		return u.Username
	}
	return strconv.Itoa(os.Getuid())
}
