package yarn

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/auth"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/secretfd"
	"github.com/spindle-ml/spindle/yarn/am"
)

// DriverSilence is how long the ApplicationMaster of a client-mode job
// waits without hearing from its driver before it ends the application.
const DriverSilence = 90 * time.Second

// RunAM is the ApplicationMaster's main (`spindle yarn-am`, run by YARN in
// the AM container): it registers with the ResourceManager, serves the
// driver's requests until the driver finishes the application (or goes
// silent, or YARN stops the container), then unregisters with the final
// status and removes the staging directory. In cluster mode the driver
// runs here: run runs it, with this AM as its cluster manager.
func RunAM(ctx context.Context, logger *slog.Logger, run DriverFunc) error {
	tokFile := os.Getenv(hadooprpc.EnvTokenFile)
	if tokFile == "" {
		return fmt.Errorf("$%s is not set: spindle yarn-am runs inside a YARN container started by spindle submit", hadooprpc.EnvTokenFile)
	}
	creds, err := hadooprpc.ReadCredentialsFile(tokFile)
	if err != nil {
		return err
	}
	plan, err := planFrom(creds)
	if err != nil {
		return err
	}
	amrm, ok := creds.TokenOfKind(am.AMRMTokenKind)
	if !ok {
		return fmt.Errorf("credentials file %s holds no %s: YARN did not give this container an AMRMToken", tokFile, am.AMRMTokenKind)
	}
	var output *outputLog
	if plan.Cluster != nil {
		// The gateway sees the AM's own lines (the gang, locality,
		// completed containers) beside the driver's.
		output = newOutputLog()
		logger = teeLogger(logger, output.writer(true))
	}
	log := logger.With("component", "yarn-am", "app", plan.AppID)
	host := os.Getenv("NM_HOST")
	if host == "" {
		host, _ = os.Hostname()
	}
	ln, err := listenAM(plan, host)
	if err != nil {
		return err
	}
	port := ln.Addr().(*net.TCPAddr).Port

	alloc, err := am.Start(ctx, am.Config{
		SchedulerAddrs: plan.SchedulerAddrs, AMRMToken: amrm, RPCProtection: plan.RPCProtection, Host: host, Port: port,
		LaunchContext:    executorLaunchContext(plan, hdfsTokens(creds)),
		MemoryOverheadMB: plan.OverheadMB, GangTimeout: time.Duration(plan.GangTimeoutMS) * time.Millisecond,
		TrackingURL: plan.TrackingURL, Racks: plan.Racks, LocalityWait: time.Duration(plan.LocalityWaitMS) * time.Millisecond,
		Logger: logger,
	})
	if err != nil {
		ln.Close()
		return err
	}
	defer alloc.Close()
	if plan.Cluster != nil {
		return runClusterAM(ctx, plan, creds, alloc, ln, host, run, output, log)
	}
	return runClientAM(ctx, plan, alloc, ln, host, log)
}

// runClientAM serves the driver on the gateway (client mode) until it
// finishes the application, goes silent or ctx ends, then finishes the
// application with YARN and removes its staging directory.
func runClientAM(ctx context.Context, plan Plan, alloc *am.Allocator, ln net.Listener, host string, log *slog.Logger) error {
	port := ln.Addr().(*net.TCPAddr).Port
	if attempt := am.Attempt(os.Getenv("CONTAINER_ID")); attempt > 1 {
		// The driver on the gateway knew the first attempt only: a new one
		// cannot rejoin it, and must not start a second gang.
		ln.Close()
		msg := fmt.Sprintf("ApplicationMaster attempt %d: the first attempt was lost, and in client mode a new attempt cannot rejoin the driver on the gateway", attempt)
		log.Warn("ending the application", "reason", msg)
		fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		ferr := alloc.Finish(fctx, pb.FinalApplicationStatusProto_APP_FAILED, msg)
		if plan.StagingURI != "" {
			removeStaging(fctx, plan.StagingURI, fsys.Options{}, log)
		}
		return ferr
	}

	events := newEventLog()
	finish := make(chan amFinish, 1)
	var lastContact atomic.Int64
	lastContact.Store(time.Now().UnixNano())
	signer, err := auth.NewSigner(plan.AMSecret)
	if err != nil {
		return fmt.Errorf("the ApplicationMaster's secret: %w", err)
	}
	h := amHandlers{
		signer: signer.For(amAudience(plan)),
		request: func(ctx context.Context, specs []driver.ExecutorSpec) error {
			for i := range specs {
				specs[i].Env = mergeEnv(plan.Env, specs[i].Env)
			}
			return alloc.Request(ctx, specs)
		},
		release:  alloc.Release,
		progress: alloc.SetProgress,
		finish: func(f amFinish) {
			select {
			case finish <- f:
			default:
			}
		},
		events: events,
		touch:  func() { lastContact.Store(time.Now().UnixNano()) },
	}
	srv := &http.Server{Handler: h.mux(), ReadHeaderTimeout: 10 * time.Second}
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	g, gctx := errgroup.WithContext(runCtx)
	g.Go(func() error {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			return err
		}
		return nil
	})
	g.Go(func() error {
		<-gctx.Done()
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return srv.Shutdown(sctx)
	})
	g.Go(func() error {
		for {
			select {
			case ev := <-alloc.Events():
				events.add(ev)
			case <-gctx.Done():
				return nil
			}
		}
	})
	log.Info("serving the driver", "url", amBase(plan, host, port))

	result := awaitFinish(ctx, alloc, finish, events, &lastContact)
	log.Info("finishing", "status", result.Status, "diagnostics", result.Diagnostics)
	fctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ferr := alloc.Finish(fctx, finalStatus(result.Status), result.Diagnostics)
	stop()
	g.Wait()
	if plan.StagingURI != "" {
		removeStaging(fctx, plan.StagingURI, fsys.Options{}, log)
	}
	return ferr
}

// awaitFinish waits for the application's end: the driver's finish, ctx
// ending, the allocator failing or the driver going silent for longer
// than DriverSilence.
func awaitFinish(ctx context.Context, alloc *am.Allocator, finish <-chan amFinish, events *eventLog, lastContact *atomic.Int64) amFinish {
	var result amFinish
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
wait:
	for {
		select {
		case result = <-finish:
			break wait
		case <-ctx.Done():
			result = amFinish{Status: "KILLED", Diagnostics: "the ApplicationMaster was stopped"}
			break wait
		case <-tick.C:
			if err := alloc.Err(); err != nil {
				events.fail(err.Error())
				result = amFinish{Status: "FAILED", Diagnostics: err.Error()}
				break wait
			}
			if silent := time.Since(time.Unix(0, lastContact.Load())); silent > DriverSilence {
				result = amFinish{Status: "FAILED", Diagnostics: fmt.Sprintf("the driver went silent for %v", silent.Round(time.Second))}
				break wait
			}
		}
	}
	return result
}

// removeStaging removes the staging directory from inside the cluster, so
// it goes even when the client is gone; opts say how to log in (none: the
// container's delegation tokens).
func removeStaging(ctx context.Context, uri string, opts fsys.Options, log *slog.Logger) {
	r := fsys.NewResolver(opts)
	defer r.Close()
	f, name, err := r.Resolve(ctx, uri)
	if err == nil {
		err = removeTree(ctx, f, name)
	}
	if err != nil {
		log.Warn("remove staging directory", "uri", uri, "err", err)
	}
}

func finalStatus(s string) pb.FinalApplicationStatusProto {
	switch s {
	case "SUCCEEDED":
		return pb.FinalApplicationStatusProto_APP_SUCCEEDED
	case "KILLED":
		return pb.FinalApplicationStatusProto_APP_KILLED
	}
	return pb.FinalApplicationStatusProto_APP_FAILED
}

func mergeEnv(base, over map[string]string) map[string]string {
	out := make(map[string]string, len(base)+len(over))
	for k, v := range base {
		out[k] = v
	}
	for k, v := range over {
		out[k] = v
	}
	return out
}

// executorLaunchContext builds an executor's container launch context: the
// staged spindle binary, the executor's arguments on the command line and
// its environment and the job's HDFS delegation tokens in the container's
// credentials.
func executorLaunchContext(plan Plan, hdfs map[string]hadooprpc.Token) func(spec driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error) {
	return func(spec driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error) {
		tokens, err := envCredentials(spec.Env, hdfs)
		if err != nil {
			return nil, err
		}
		cmd := "./spindle yarn-container -- " + shellJoin(spec.Args) + " 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"
		return &pb.ContainerLaunchContextProto{
			LocalResources: []*pb.StringLocalResourceMapProto{{Key: proto.String("spindle"), Value: plan.Spindle.Proto()}},
			Tokens:         tokens,
			Environment:    []*pb.StringStringMapProto{{Key: proto.String("SPINDLE_EXECUTOR_ID"), Value: proto.String(spec.ID)}},
			Command:        []string{cmd},
		}, nil
	}
}

// shellJoin quotes args for the bash launch script YARN writes.
func shellJoin(args []string) string {
	out := make([]string, len(args))
	for i, a := range args {
		out[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
	}
	return strings.Join(out, " ")
}

// RunContainer is the wrapper that starts a command inside a YARN
// container (`spindle yarn-container -- ARGS`): it takes the secrets
// Spindle put into the container's credentials out of the credentials
// file (which the training process reads for its Hadoop tokens) and hands
// them to the spindle binary, run with ARGS in its place, through an
// inherited pipe: never through the environment, which the training
// process could read in /proc/PPID/environ.
func RunContainer(args []string) error {
	tokFile := os.Getenv(hadooprpc.EnvTokenFile)
	if tokFile == "" {
		return fmt.Errorf("$%s is not set: spindle yarn-container runs inside a YARN container", hadooprpc.EnvTokenFile)
	}
	carried, err := takeEnvSecrets(tokFile)
	if err != nil {
		return err
	}
	secrets, plain := secretfd.Split(carried)
	env := os.Environ()
	for k, v := range plain {
		env = append(env, k+"="+v)
	}
	if len(secrets) > 0 {
		entry, err := secretfd.Inheritable(secrets)
		if err != nil {
			return err
		}
		env = append(env, entry)
	}
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the spindle binary: %w", err)
	}
	return syscall.Exec(self, append([]string{self}, args...), env)
}

// takeEnvSecrets returns the secrets carried in the credentials file
// under envAliasPrefix and rewrites the file without them.
func takeEnvSecrets(path string) (map[string]string, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read the container's credentials: %w", err)
	}
	creds, err := hadooprpc.ReadCredentials(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("credentials file %s: %w", path, err)
	}
	secrets := map[string]string{}
	for alias, v := range creds.Secrets {
		if k, ok := strings.CutPrefix(alias, envAliasPrefix); ok {
			secrets[k] = string(v)
			delete(creds.Secrets, alias)
		}
	}
	if len(secrets) == 0 {
		return nil, nil
	}
	version := hadooprpc.CredentialsWritable
	if len(raw) > 4 {
		version = raw[4]
	}
	b, err := creds.Marshal(version)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(path, b); err != nil {
		return nil, fmt.Errorf("take the job's secrets out of the credentials file %s: %w", path, err)
	}
	return secrets, nil
}

// writeFileAtomic replaces path with b (mode 0600) through a temporary
// file renamed over it.
func writeFileAtomic(path string, b []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(b); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

// newSecret returns 32 random bytes in hex.
func newSecret() string {
	b := make([]byte, 32)
	rand.Read(b)
	return hex.EncodeToString(b)
}
