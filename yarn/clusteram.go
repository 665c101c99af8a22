package yarn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
)

// DriverJob is a cluster-mode job as the ApplicationMaster hands it to
// the driver it runs.
type DriverJob struct {
	ClusterJob
	// AppID is the YARN application's id, which is also the job's.
	AppID string
	// ClusterManager is this ApplicationMaster: it gets the executors'
	// containers from the ResourceManager.
	ClusterManager driver.ClusterManager
	// Stdout and Stderr are the driver's output streams: the AM
	// container's logs and the gateway's terminal.
	Stdout, Stderr io.Writer
}

// DriverFunc runs a cluster-mode job's driver to its end and says how it
// ended.
type DriverFunc func(ctx context.Context, job DriverJob) JobResult

// amConfDir is where the cluster-mode AM puts the Hadoop client
// configuration the gateway staged.
const amConfDir = "hadoop-conf"

// amConfPrefix prefixes the link names of staged Hadoop configuration
// files in the AM's container.
const amConfPrefix = "hadoop-conf-"

// runClusterAM runs a cluster-mode job: the driver runs in this process,
// with the allocator as its cluster manager, while the gateway streams its
// output over the AM's API. The application's final status is the job's.
func runClusterAM(ctx context.Context, plan Plan, creds *hadooprpc.Credentials, alloc *am.Allocator, ln net.Listener, host string, run DriverFunc, output *outputLog, log *slog.Logger) error {
	driverCtx, stopDriver := context.WithCancel(ctx)
	defer stopDriver()
	var gatewayStop atomic.Bool
	refuse := errors.New("this is a cluster-mode application: its driver runs in the ApplicationMaster")
	signer, err := auth.NewSigner(plan.AMSecret)
	if err != nil {
		ln.Close()
		return fmt.Errorf("the ApplicationMaster's secret: %w", err)
	}
	h := amHandlers{
		signer:  signer.For(amAudience(plan)),
		request: func(context.Context, []driver.ExecutorSpec) error { return refuse },
		release: func(context.Context, []string) error { return refuse },
		finish: func(f amFinish) {
			// The gateway stops the job (Ctrl-C): the driver stops its
			// executors and the application ends KILLED.
			log.Info("the gateway stops the job", "status", f.Status, "diagnostics", f.Diagnostics)
			gatewayStop.Store(true)
			output.stopReading()
			stopDriver()
		},
		events: newEventLog(),
		output: output,
	}
	srv := &http.Server{Handler: h.mux(), ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	log.Info("serving the gateway", "url", amBase(plan, host, ln.Addr().(*net.TCPAddr).Port))

	res := runDriver(driverCtx, plan, creds, alloc, output, run, log)
	log.Info("the driver ended", "code", res.Code, "message", res.Message)
	if ctx.Err() != nil && !gatewayStop.Load() {
		// YARN is stopping this container: the application was killed,
		// or this attempt failed and another may follow. The job's end
		// is YARN's to say (the gateway reads it from the application's
		// report, or follows the next attempt), so the AM neither
		// reports a result nor unregisters; the last attempt removes the
		// staging directory, which a next one would need.
		srv.Close()
		<-served
		attempt := am.Attempt(os.Getenv("CONTAINER_ID"))
		log.Warn("stopped by YARN", "attempt", attempt, "max_attempts", plan.MaxAttempts)
		if plan.StagingURI != "" && attempt >= plan.MaxAttempts {
			rctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			removeStaging(rctx, plan.StagingURI, stagingOptions(creds), log)
		}
		return ctx.Err()
	}
	output.finish(res)
	wctx, wcancel := context.WithTimeout(context.Background(), 15*time.Second)
	output.waitDrained(wctx, 15*time.Second)
	wcancel()

	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	diag := res.Message
	if len(diag) > 4000 {
		diag = diag[:4000] + "..."
	}
	ferr := alloc.Finish(fctx, finalStatus(res.status()), diag)
	sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
	srv.Shutdown(sctx)
	scancel()
	if err := <-served; err != nil && !errors.Is(err, http.ErrServerClosed) {
		log.Warn("the gateway API stopped", "err", err)
	}
	if plan.StagingURI != "" {
		removeStaging(fctx, plan.StagingURI, stagingOptions(creds), log)
	}
	return ferr
}

// runDriver prepares the driver's environment in the container (the
// Hadoop client configuration the gateway staged, and the Kerberos login
// of a keytab the gateway sent in creds) and runs it.
func runDriver(ctx context.Context, plan Plan, creds *hadooprpc.Credentials, alloc *am.Allocator, output *outputLog, run DriverFunc, log *slog.Logger) (res JobResult) {
	defer func() {
		if p := recover(); p != nil {
			res = JobResult{Code: 1, Message: fmt.Sprintf("the driver crashed in the ApplicationMaster: %v", p)}
		}
	}()
	stdout := io.MultiWriter(os.Stdout, output.writer(false))
	stderr := io.MultiWriter(os.Stderr, output.writer(true))
	job := *plan.Cluster
	confDir, err := linkConfDir(plan.AMFiles)
	if err != nil {
		return JobResult{Code: 1, Message: err.Error()}
	}
	job.Settings = append(append([]string(nil), job.Settings...), config.KeyHadoopConfDir+"="+confDir)
	var cm driver.ClusterManager = alloc
	wd, err := os.Getwd()
	if err != nil {
		return JobResult{Code: 1, Message: fmt.Sprintf("find the container's working directory: %v", err)}
	}
	login, ok, err := writeAMLogin(creds, wd)
	switch {
	case err != nil:
		return JobResult{Code: 1, Message: err.Error()}
	case ok:
		// The gateway sent its keytab: the driver logs in itself, reads
		// HDFS with that login and keeps its executors' tokens fresh.
		tokens, err := startAMKeeper(ctx, login, confDir, job, log)
		if err != nil {
			return JobResult{Code: 1, Message: err.Error()}
		}
		defer tokens.Close()
		log.Info("the driver logged in from the keytab of its launch credentials", "principal", login.principal)
		job.Settings = append(job.Settings, login.loginSettings()...)
		cm = keptAllocator{Allocator: alloc, tokens: tokens}
	default:
		// A ticket cache on the gateway: the job runs on the launch
		// tokens, which YARN renews up to their maximum lifetime.
		var wg sync.WaitGroup
		wctx, stop := context.WithCancel(ctx)
		defer func() {
			stop()
			wg.Wait()
		}()
		watchLifetimes(wctx, &wg, hdfsTokens(creds), log)
	}
	return run(ctx, DriverJob{ClusterJob: job, AppID: plan.AppID, ClusterManager: cm, Stdout: stdout, Stderr: stderr})
}

// linkConfDir gathers the localized Hadoop configuration files into one
// directory, the driver's HADOOP_CONF_DIR, and returns its absolute path.
func linkConfDir(files map[string]Resource) (string, error) {
	wd, err := os.Getwd()
	if err != nil {
		return "", fmt.Errorf("find the container's working directory: %w", err)
	}
	dir := filepath.Join(wd, amConfDir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("create %s: %w", dir, err)
	}
	for link := range files {
		name, ok := strings.CutPrefix(link, amConfPrefix)
		if !ok {
			continue
		}
		if err := os.Symlink(filepath.Join(wd, link), filepath.Join(dir, name)); err != nil && !errors.Is(err, os.ErrExist) {
			return "", fmt.Errorf("link the Hadoop configuration file %s: %w", name, err)
		}
	}
	return dir, nil
}

// teeLogger returns a logger writing what logger writes, at the same
// level, also as text lines to w.
func teeLogger(logger *slog.Logger, w io.Writer) *slog.Logger {
	level := slog.LevelError
	for _, l := range []slog.Level{slog.LevelDebug, slog.LevelInfo, slog.LevelWarn} {
		if logger.Enabled(context.Background(), l) {
			level = l
			break
		}
	}
	return slog.New(teeHandler{logger.Handler(), slog.NewTextHandler(w, &slog.HandlerOptions{Level: level})})
}

// teeHandler hands every record to two handlers.
type teeHandler struct{ a, b slog.Handler }

func (t teeHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return t.a.Enabled(ctx, l) || t.b.Enabled(ctx, l)
}

func (t teeHandler) Handle(ctx context.Context, r slog.Record) error {
	var errs []error
	for _, h := range []slog.Handler{t.a, t.b} {
		if h.Enabled(ctx, r.Level) {
			errs = append(errs, h.Handle(ctx, r.Clone()))
		}
	}
	return errors.Join(errs...)
}

func (t teeHandler) WithAttrs(as []slog.Attr) slog.Handler {
	return teeHandler{t.a.WithAttrs(as), t.b.WithAttrs(as)}
}

func (t teeHandler) WithGroup(name string) slog.Handler {
	return teeHandler{t.a.WithGroup(name), t.b.WithGroup(name)}
}
