package yarn

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/config"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// App is a cluster-mode application seen from the gateway: its driver runs
// in the ApplicationMaster's container, and `spindle submit` follows it.
type App struct {
	*gateway
	id   client.AppID
	st   *stager
	plan Plan

	mu     sync.Mutex
	ended  bool                       // the application reached a final state
	tokens map[string]hadooprpc.Token // HDFS delegation tokens by cluster URI, cancelled on Close
	once   sync.Once
}

// SubmitCluster submits job in cluster mode: it stages the spindle binary,
// the Hadoop client configuration and the job's local files
// (--files, --py-files, --archives, which executors then fetch from the
// staging directory), and submits the ApplicationMaster that runs the
// driver. Errors found before submitting wrap ErrConfig or ErrUnreachable
// as NewClusterManager's do.
func SubmitCluster(ctx context.Context, cfg Config, job ClusterJob) (*App, error) {
	g, err := newGateway(ctx, cfg)
	if err != nil {
		return nil, err
	}
	id, st, err := g.newApp(ctx, func(maxMB int64) error {
		if int64(cfg.AMMemoryMB) > maxMB {
			return fmt.Errorf("%w: the ApplicationMaster, which runs the driver in cluster mode, needs %d MiB (spindle.yarn.am.memory) but YARN's largest container is %d MiB (yarn.scheduler.maximum-allocation-mb)",
				ErrConfig, cfg.AMMemoryMB, maxMB)
		}
		// The driver asks for executors only once it runs in the AM:
		// what can never fit is refused here, before anything runs.
		for _, e := range job.Executors {
			spec := driver.ExecutorSpec{MemoryMB: e.MemoryMB, SharedMemoryMB: e.SharedMemoryMB}
			if need := int64(am.ContainerMB(spec, cfg.MemoryOverheadMB)); need > maxMB {
				return fmt.Errorf("%w: each %s needs %d MiB (%s plus %d MiB spindle.yarn.executor.memoryOverhead%s) but YARN's largest container is %d MiB (yarn.scheduler.maximum-allocation-mb)",
					ErrConfig, e.Role, need, e.Key, cfg.MemoryOverheadMB, am.SharedPhrase(e.SharedMemoryMB), maxMB)
			}
		}
		return nil
	})
	a := &App{gateway: g, id: id, st: st}
	if err != nil {
		a.Close()
		return nil, err
	}
	if err := a.submit(ctx, job); err != nil {
		a.Close()
		return nil, err
	}
	return a, nil
}

// ID returns the application's id.
func (a *App) ID() client.AppID { return a.id }

func (a *App) submit(ctx context.Context, job ClusterJob) error {
	res, err := a.stageBinary(ctx, a.st)
	if err != nil {
		return err
	}
	conf, err := a.stageConf(ctx)
	if err != nil {
		return err
	}
	if job.Files, err = a.stageFiles(ctx, "--files", job.Files, "files"); err != nil {
		return err
	}
	if job.PyFiles, err = a.stageFiles(ctx, "--py-files", job.PyFiles, "py-files"); err != nil {
		return err
	}
	if job.Archives, err = a.stageFiles(ctx, "--archives", job.Archives, "archives"); err != nil {
		return err
	}
	// The driver reads HDFS as the user who submitted.
	job.Settings = append(append([]string(nil), job.Settings...), config.KeyHadoopUser+"="+a.cfg.User)
	a.plan = Plan{
		AppID: a.id.String(), Spindle: res, AMSecret: newSecret(),
		GangTimeoutMS: a.cfg.GangTimeout.Milliseconds(), OverheadMB: a.cfg.MemoryOverheadMB,
		StagingURI: a.st.base, LogLevel: a.cfg.LogLevel, AMFiles: conf,
		Racks: a.racks(ctx), LocalityWaitMS: a.cfg.LocalityWait.Milliseconds(),
		Cluster: &job,
	}
	if settingsJobTLS(job.Settings) {
		// Job TLS: the gateway's calls to the AM go over HTTPS too.
		if a.plan.AMTLS, err = newAMTLS(a.plan.AppID); err != nil {
			return err
		}
	}
	var tokens map[string]hadooprpc.Token
	if a.sec.Kerberos {
		if tokens, err = a.delegationTokens(ctx, job); err != nil {
			return err
		}
	}
	// With a keytab, the driver in the AM logs in itself: the keytab
	// travels in the AM's launch credentials, nowhere else.
	secrets, err := a.amLoginSecrets()
	if err != nil {
		return err
	}
	return a.launch(ctx, a.id, a.plan, tokens, secrets)
}

// delegationTokens obtains, for a cluster-mode job on a Kerberized
// cluster, an HDFS delegation token renewable by the ResourceManager from
// every cluster the job names (the default file system, which holds the
// staging directory, and each hdfs:// URI in its inputs, settings, command
// and environment), and returns them by service for the AM's credentials.
// A driver in the AM without a keytab login reads HDFS, and hands its
// executors, these tokens; YARN gives the AM its AMRMToken.
func (a *App) delegationTokens(ctx context.Context, job ClusterJob) (map[string]hadooprpc.Token, error) {
	named := driver.ExecutorSpec{Env: job.Env}
	named.Args = append(append(append(append([]string(nil), job.Inputs...), job.Settings...), job.Command...), job.Files...)
	named.Args = append(append(named.Args, job.PyFiles...), job.Archives...)
	renewer := a.sec.Renewer()
	out := map[string]hadooprpc.Token{}
	byURI := map[string]hadooprpc.Token{}
	for _, uri := range jobNamenodes(a.conf.Get("fs.defaultFS", ""), []driver.ExecutorSpec{named}) {
		tctx, cancel := context.WithTimeout(ctx, a.cfg.Timeouts.TokenFetch)
		tok, err := a.resolver.DelegationToken(tctx, uri+"/", renewer)
		cancel()
		if err != nil {
			return nil, fmt.Errorf("%w: HDFS delegation token for the job's ApplicationMaster and containers: %v", ErrConfig, err)
		}
		out[tok.Service] = tok
		byURI[uri] = tok
		a.log.Info("hdfs delegation token obtained", "cluster", uri, "service", tok.Service, "renewer", renewer)
	}
	a.mu.Lock()
	a.tokens = byURI
	a.mu.Unlock()
	return out, nil
}

// stageConf stages the Hadoop client configuration (the *.xml files of
// HADOOP_CONF_DIR), which the driver in the AM and its executors use.
func (a *App) stageConf(ctx context.Context) (map[string]Resource, error) {
	entries, err := os.ReadDir(a.conf.Dir)
	if err != nil {
		return nil, fmt.Errorf("%w: read the Hadoop configuration directory %s: %v", ErrConfig, a.conf.Dir, err)
	}
	out := map[string]Resource{}
	for _, e := range entries {
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".xml") {
			continue
		}
		r, err := a.st.put(ctx, filepath.Join(a.conf.Dir, e.Name()), "conf/"+e.Name())
		if err != nil {
			return nil, err
		}
		out[amConfPrefix+e.Name()] = r
	}
	return out, nil
}

// stageFiles copies the local files of a list (--files, --py-files,
// --archives, whose local paths the submit has made absolute) to the
// staging directory and returns the list with their hdfs:// URIs in their
// place; URIs (hdfs://...) stay as they are. Each file keeps its name in a
// directory of its own, so that executors place it under that name.
func (a *App) stageFiles(ctx context.Context, flag string, list []string, dir string) ([]string, error) {
	out := make([]string, len(list))
	for i, entry := range list {
		uri, alias, hasAlias := entry, "", false
		if flag == "--archives" {
			if j := strings.LastIndexByte(entry, '#'); j >= 0 {
				uri, alias, hasAlias = entry[:j], entry[j:], true
			}
		}
		local, ok := localFile(uri)
		if !ok {
			out[i] = entry
			continue
		}
		name := path.Join(dir, strconv.Itoa(i), filepath.Base(local))
		if _, err := a.st.put(ctx, local, name); err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, entry, err)
		}
		out[i] = a.st.base + "/" + name
		if hasAlias {
			out[i] += alias
		}
	}
	return out, nil
}

// localFile returns the local path an entry names (a path or file:// URI).
func localFile(p string) (string, bool) {
	if rest, ok := strings.CutPrefix(p, "file://"); ok {
		return rest, true
	}
	if i := strings.Index(p, "://"); i > 0 && !strings.Contains(p[:i], "/") {
		return "", false
	}
	return p, true
}

// Follow waits for the application to end, printing its state as YARN
// reports it (its tracking URL as soon as it is accepted) and streaming
// the driver's output from the ApplicationMaster to stdout and stderr; it
// returns the job's result: the driver's own when it could be read, else
// what the ResourceManager's report says. When ctx ends (Ctrl-C), the
// application is stopped (killed when its AM does not stop it) and the
// result is an interruption (status 130).
func (a *App) Follow(ctx context.Context, stdout, stderr io.Writer) JobResult {
	var (
		amc          *amClient
		next         int
		last         pb.YarnApplicationStateProto
		rmFails      int
		amFails      int
		lastReport   *pb.ApplicationReportProto
		reportedAt   time.Time
		printedTrack bool
	)
	for {
		if ctx.Err() != nil {
			return a.interrupt(amc, stderr)
		}
		if amc == nil || time.Since(reportedAt) > 5*time.Second || amFails > 0 {
			rctx, cancel := context.WithTimeout(ctx, a.cfg.Timeouts.Follow)
			r, err := a.rm.Report(rctx, a.id)
			cancel()
			reportedAt = time.Now()
			switch {
			case err != nil && ctx.Err() != nil:
				continue
			case err != nil:
				rmFails++
				if rmFails > 20 {
					return JobResult{Code: 1, Message: fmt.Sprintf("lost the ResourceManager while following yarn application %s: %v", a.id, err)}
				}
				sleepCtx(ctx, time.Second)
				continue
			}
			rmFails = 0
			lastReport = r
			st := r.GetYarnApplicationState()
			if st != last {
				a.log.Info("application state", "app", a.id, "state", st)
				last = st
			}
			if !printedTrack && (st == pb.YarnApplicationStateProto_ACCEPTED || st == pb.YarnApplicationStateProto_RUNNING) && r.GetTrackingUrl() != "" {
				fmt.Fprintf(stderr, "yarn application %s accepted; tracking URL: %s\n", a.id, r.GetTrackingUrl())
				printedTrack = true
			}
			if client.IsFinal(st) && (amc == nil || amFails > 0) {
				a.setEnded()
				return resultOf(a.id, r)
			}
			if st == pb.YarnApplicationStateProto_RUNNING && r.GetRpcPort() > 0 && r.GetHost() != "" && r.GetHost() != "N/A" {
				base := amBase(a.plan, r.GetHost(), int(r.GetRpcPort()))
				switch {
				case amc == nil:
					fmt.Fprintf(stderr, "yarn application %s running; its driver is in the ApplicationMaster on %s\n", a.id, r.GetHost())
				case amc.base != base:
					// The first attempt's AM is gone and YARN started
					// another (spindle.yarn.maxAppAttempts): its driver
					// runs the job again, from its newest complete
					// checkpoint when it has one.
					fmt.Fprintf(stderr, "yarn application %s: the ApplicationMaster was lost; YARN's next attempt runs the job again on %s, from its newest complete checkpoint if it has one\n", a.id, r.GetHost())
					next, amFails = 0, 0
				}
				if amc == nil || amc.base != base {
					c, err := newAMClient(a.plan, r.GetHost(), int(r.GetRpcPort()), 30*time.Second)
					if err != nil {
						return JobResult{Code: 1, Message: fmt.Sprintf("yarn application %s: %v", a.id, err)}
					}
					amc = c
				}
			}
		}
		if amc == nil {
			sleepCtx(ctx, 300*time.Millisecond)
			continue
		}
		var out amOutput
		if err := amc.do(ctx, http.MethodGet, "/v1/output?after="+strconv.Itoa(next), nil, &out); err != nil {
			if ctx.Err() == nil {
				amFails++
				a.log.Debug("read the driver's output", "err", err, "consecutive", amFails)
				if amFails > 60 {
					return JobResult{Code: 1, Message: fmt.Sprintf("lost the ApplicationMaster of yarn application %s: %v (last state %s)", a.id, err, lastReport.GetYarnApplicationState())}
				}
				sleepCtx(ctx, time.Second)
			}
			continue
		}
		amFails = 0
		a.printOutput(&out, stdout, stderr)
		next = out.Next
		if out.Done != nil {
			return a.doneResult(ctx, *out.Done)
		}
	}
}

// printOutput writes the driver's output lines read from the
// ApplicationMaster, each to the stream it was written to.
func (a *App) printOutput(out *amOutput, stdout, stderr io.Writer) {
	if out.Dropped > 0 {
		fmt.Fprintf(stderr, "(%d lines of the driver's output were dropped; the rest is in the ApplicationMaster's log: yarn logs -applicationId %s)\n", out.Dropped, a.id)
	}
	for _, l := range out.Lines {
		w := stdout
		if l.Err {
			w = stderr
		}
		fmt.Fprintln(w, l.Text)
	}
}

// doneResult returns the job's result once the driver said it is done, after
// the application's final report: a driver that saw itself stopped was
// killed, and the report says why.
func (a *App) doneResult(ctx context.Context, done JobResult) JobResult {
	if r := a.waitFinal(context.WithoutCancel(ctx), a.id, time.Minute); r != nil {
		a.setEnded()
		if msg, ok := killedMessage(a.id, r); ok && done.Code != 0 {
			return JobResult{Code: ExitKilled, Message: msg}
		}
	}
	return done
}

// interrupt stops the application after Ctrl-C: the driver in the AM is
// asked to stop (its executors get their grace period), and the
// application is killed when it has not ended soon after.
func (a *App) interrupt(amc *amClient, stderr io.Writer) JobResult {
	fmt.Fprintf(stderr, "interrupted: stopping yarn application %s\n", a.id)
	ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeouts.Interrupt)
	defer cancel()
	stopped := false
	if amc != nil {
		fctx, fcancel := context.WithTimeout(ctx, a.cfg.Timeouts.AMCall)
		stopped = amc.do(fctx, http.MethodPost, "/v1/finish", amFinish{Status: "KILLED", Diagnostics: "interrupted on the gateway"}, nil) == nil
		fcancel()
	}
	if !stopped || a.waitFinal(ctx, a.id, 30*time.Second) == nil {
		if _, err := a.rm.Kill(ctx, a.id, "spindle submit was interrupted on the gateway"); err != nil {
			return JobResult{Code: 130, Message: fmt.Sprintf("job interrupted, but killing yarn application %s failed: %v", a.id, err)}
		}
		a.waitFinal(ctx, a.id, 30*time.Second)
	}
	a.setEnded()
	return JobResult{Code: 130, Message: fmt.Sprintf("job interrupted; yarn application %s was stopped", a.id)}
}

func (a *App) setEnded() {
	a.mu.Lock()
	a.ended = true
	a.mu.Unlock()
}

// resultOf reads a job's result from its application's final report, for
// when the driver's own could not be read.
func resultOf(id client.AppID, r *pb.ApplicationReportProto) JobResult {
	diag := strings.TrimSpace(r.GetDiagnostics())
	switch {
	case r.GetFinalApplicationStatus() == pb.FinalApplicationStatusProto_APP_SUCCEEDED:
		return JobResult{Code: 0, Message: fmt.Sprintf("yarn application %s succeeded", id)}
	}
	if msg, ok := killedMessage(id, r); ok {
		return JobResult{Code: ExitKilled, Message: msg}
	}
	return JobResult{Code: 1, Message: fmt.Sprintf("yarn application %s failed (%s): %s", id, r.GetYarnApplicationState(), diag)}
}

// Close kills the application if it has not ended (the gateway gave up on
// it), removes its staging directory and closes the connections.
func (a *App) Close() error {
	var err error
	a.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), a.cfg.Timeouts.Close)
		defer cancel()
		var errs []error
		a.mu.Lock()
		ended := a.ended
		a.mu.Unlock()
		if a.plan.AppID != "" && !ended {
			if r, rerr := a.rm.Report(ctx, a.id); rerr != nil || !client.IsFinal(r.GetYarnApplicationState()) {
				if _, kerr := a.rm.Kill(ctx, a.id, "spindle submit stopped following it"); kerr != nil {
					errs = append(errs, kerr)
				}
				a.waitFinal(ctx, a.id, 30*time.Second)
			}
		}
		// The application has ended: its tokens go (a ResourceManager
		// that cancels an application's tokens itself was first).
		a.mu.Lock()
		tokens := a.tokens
		a.tokens = nil
		a.mu.Unlock()
		for uri, tok := range tokens {
			if cerr := a.resolver.CancelDelegationToken(ctx, uri+"/", tok); cerr != nil {
				a.log.Info("hdfs delegation token not cancelled: the ResourceManager may have cancelled it at the application's end", "cluster", uri, "err", cerr)
			}
		}
		if a.st != nil {
			if rerr := a.st.removeAll(ctx); rerr != nil {
				errs = append(errs, fmt.Errorf("remove staging directory %s: %w", a.st.base, rerr))
			}
		}
		a.gateway.close()
		err = errors.Join(errs...)
	})
	return err
}

func sleepCtx(ctx context.Context, d time.Duration) {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// CheckClusterInputs refuses, before anything is submitted, inputs that
// name the gateway's working directory: in cluster mode the driver plans
// the job in the cluster, where a relative path means nothing. It refuses
// pushed input too: the driver would write the producers' token (and,
// with job TLS, the CA they verify it with) on the ApplicationMaster's
// host, out of the producers' reach.
func CheckClusterInputs(inputs []string) error {
	for _, in := range inputs {
		if feed.IsFlightPutURI(in) {
			return fmt.Errorf("%w: --input %s (pushed input) does not work in --deploy-mode cluster: the driver would write the producers' token "+
				"on the ApplicationMaster's host, where producers cannot read it; submit in --deploy-mode client (driver, endpoint and token file on this host)",
				driver.ErrConfig, in)
		}
		if local, ok := localFile(in); ok && !filepath.IsAbs(local) {
			return fmt.Errorf("%w: --input %s is a path relative to this machine's working directory; in --deploy-mode cluster the driver runs in the cluster: give an hdfs:// URI (or an absolute path every node has)",
				driver.ErrConfig, in)
		}
	}
	return nil
}
