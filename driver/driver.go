package driver

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/apache/arrow-go/v18/arrow/ipc"
	"golang.org/x/sync/errgroup"
	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/feed/wire"
	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/auth"
	"github.com/spindle-ml/spindle/internal/liveness"
	"github.com/spindle-ml/spindle/internal/rpc"

	"github.com/spindle-ml/spindle/feed/plan"
)

// ErrInterrupted is returned when the job was stopped by its context
// (Ctrl-C on submit).
var ErrInterrupted = errors.New("driver: job interrupted")

// Driver runs one job.
type Driver struct {
	cfg    Config
	cm     ClusterManager
	res    *fsys.Resolver
	logger *slog.Logger
	secret string
	signer *auth.Signer
	// expectRows is the rows the job feeds over every epoch and rank, for
	// the progress line's ETA; run sets it once the job is planned.
	expectRows int64
	// obs records what happens to the job for its web UI, event log and
	// metrics; run sets it once the job is planned, Run ends it.
	obs *observer
	// hadoopConf are the Hadoop configuration files executors fetch.
	hadoopConf []string
	// resumer finds the checkpoint each generation resumes from; nil
	// without a checkpoint directory.
	resumer *resumer
	// grow, while an elastic generation runs, says whether to stop it
	// and grow (checked on the driver's ticks); nil otherwise.
	grow func(context.Context) bool
	// shrunk counts the workers the running generation went on without
	// in place (shrink.go), and grown the newcomers that joined it in
	// place (growinplace.go).
	shrunk, grown atomic.Int32
	// growRoom, while an elastic generation that grows in place runs,
	// says whether the cluster has room for a newcomer to join its n
	// ranks; newcomers numbers the newcomers' executors.
	growRoom  func(ctx context.Context, n int) bool
	newcomers int
	// push is the endpoint of a flight-put: input, once planned.
	push *pushInput
	// tls is the job's TLS (spindle.job.tls.enabled); nil without.
	tls *jobTLS
	// elasticFeed is how the running elastic generation dealt its feed
	// (inplacefeed.go); nil under the other policies.
	elasticFeed *elasticFeed
}

// New returns a Driver for cfg that gets its executors from cm. The
// driver does not own cm: the caller closes it after Run.
func New(cfg Config, cm ClusterManager) (*Driver, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.JobID == "" {
		cfg.JobID = newJobID()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	secret, err := auth.NewSecret()
	if err != nil {
		return nil, err
	}
	signer, err := auth.NewSigner(secret)
	if err != nil {
		return nil, err
	}
	var jt *jobTLS
	if cfg.JobTLS {
		if jt, err = newJobTLS(cfg.JobID); err != nil {
			return nil, err
		}
	}
	return &Driver{
		tls: jt,
		cfg: cfg,
		cm:  cm,
		// A keytab logs in afresh as it must: the driver never reads
		// with delegation tokens of its process's credentials file then
		// (a cluster-mode driver's launch tokens end at their maximum
		// lifetime).
		res: fsys.NewResolver(fsys.Options{HadoopConfDir: cfg.HadoopConfDir, User: cfg.HadoopUser,
			KerberosPrincipal: cfg.KerberosPrincipal, KerberosKeytab: cfg.KerberosKeytab, NoTokens: cfg.KerberosKeytab != ""}),
		logger: cfg.Logger.With("component", "driver", "job", cfg.JobID),
		secret: secret,
		signer: signer,
	}, nil
}

// JobID returns the job's id.
func (d *Driver) JobID() string { return d.cfg.JobID }

// Close releases the driver's file-system clients.
func (d *Driver) Close() error { return d.res.Close() }

// newJobID returns a short unique job id.
func newJobID() string {
	b := make([]byte, 4)
	_, _ = rand.Read(b)
	return time.Now().UTC().Format("20060102-150405") + "-" + hex.EncodeToString(b)
}

// Plan lists the inputs and cuts them into per-rank splits. Run calls it;
// it is exported so a submit can check its inputs without running.
func (d *Driver) Plan(ctx context.Context) (*feed.JobPlan, error) {
	return d.planFor(ctx, d.cfg.NumExecutors)
}

// planFor plans the input for n ranks.
func (d *Driver) planFor(ctx context.Context, n int) (*feed.JobPlan, error) {
	c := d.cfg
	if len(c.Inputs) == 0 {
		// A job without input (it loads its own data) has nothing to plan.
		return &feed.JobPlan{Ranks: make([][]feed.Split, n), RowsPerRank: make([]int64, n)}, nil
	}
	if c.isPush() {
		jp, err := d.planPush(ctx)
		if err != nil {
			return nil, err
		}
		if c.FeedMode == "tensor" {
			if err := wire.CheckTensorSchema(jp.Schema, c.LabelColumn); err != nil {
				return nil, fmt.Errorf("tensor feed: %w", err)
			}
		}
		return jp, nil
	}
	jp, err := plan.Plan(ctx, d.res, feed.PlanRequest{
		Inputs:      c.Inputs,
		Format:      c.Format,
		Ranks:       n,
		Columns:     c.Columns,
		LabelColumn: c.LabelColumn,
		CSV:         c.CSV,

		PartitionColumns: c.PartitionColumns,
		Flight:           c.Flight,
		// Ranks take a flight's endpoints whole, unread by the driver,
		// and those that keep in step agree on their batches as they
		// read them (FeedRows); an elastic job re-deals rows by count,
		// so it needs them counted.
		DealEndpoints: c.FailurePolicy != PolicyElastic,
	})
	if err != nil {
		return nil, err
	}
	if err := feed.CheckEven(jp.RowsPerRank, c.BatchRows, c.EvenBatches); err != nil {
		return nil, err
	}
	if c.FeedMode == "tensor" {
		if err := wire.CheckTensorSchema(jp.Schema, c.LabelColumn); err != nil {
			return nil, fmt.Errorf("tensor feed: %w", err)
		}
	}
	return jp, nil
}

// run runs the job to its end (see Run).
func (d *Driver) run(ctx context.Context) error {
	c := d.cfg
	start := time.Now()
	defer d.stopPush()
	if c.isPush() {
		// The job's page and tracking URL show where producers push
		// while the driver waits for the first one's schema.
		if err := d.startPush(); err != nil {
			return err
		}
		d.obs = d.startObserver(ctx)
	}
	plan, err := d.Plan(ctx)
	if err != nil {
		if ctx.Err() != nil {
			// Ctrl-C while planning (a hung namenode, a large CSV scan,
			// no producer yet).
			return ErrInterrupted
		}
		return err
	}
	if d.obs == nil {
		d.obs = d.startObserver(ctx)
	}
	target := feed.EvenTarget(plan.RowsPerRank, c.BatchRows, c.EvenBatches)
	for r := range plan.RowsPerRank {
		d.expectRows += feed.EvenRows(plan.RowsPerRank, r, c.BatchRows, c.EvenBatches) * int64(c.Epochs)
	}
	d.logger.Info("planned splits", "inputs", len(c.Inputs), "rows", plan.TotalRows,
		"ranks", c.NumExecutors, "batches_per_epoch", target)
	roles := c.Roles()
	slots := layout(roles)
	// Executors that do not see this host's disk fetch what the job
	// ships from the driver.
	files, pyFiles, archives, served := c.Files, c.PyFiles, c.Archives, map[string]string(nil)
	if !sharesFileSystem(d.cm) {
		files, pyFiles, archives, served = shipFromDriver(c.Files, c.PyFiles, c.Archives)
		d.hadoopConf = shipHadoopConf(cmp.Or(c.HadoopConfDir, os.Getenv("HADOOP_CONF_DIR")), served)
	}
	tasks, err := d.taskBuilder(plan, target, slots, files, pyFiles, archives)
	if err != nil {
		return err
	}
	if d.resumer, err = d.newResumer(ctx, plan, target, start); err != nil {
		return err
	}
	if len(roles) > 1 {
		d.logger.Info("job roles", "roles", roleCounts(roles))
	}
	full := &world{n: c.NumExecutors, plan: plan, target: target, slots: slots, tasks: tasks, rows: rowTally(plan, c.EvenBatches)}
	if c.FailurePolicy == PolicyElastic {
		worlds := map[int]*world{full.n: full}
		var mu sync.Mutex // a generation going on in place plans while it runs
		build := func(ctx context.Context, n int) (*world, error) {
			mu.Lock()
			defer mu.Unlock()
			if w := worlds[n]; w != nil {
				return w, nil
			}
			p, err := d.planFor(ctx, n)
			if err != nil {
				return nil, fmt.Errorf("plan the input for %d ranks: %w", n, err)
			}
			wc := c
			wc.NumExecutors = n
			w := &world{n: n, plan: p, target: feed.EvenTarget(p.RowsPerRank, c.BatchRows, c.EvenBatches), slots: layout(wc.Roles())}
			if w.tasks, err = d.taskBuilder(p, w.target, w.slots, files, pyFiles, archives); err != nil {
				return nil, err
			}
			worlds[n] = w
			return w, nil
		}
		return d.elastic(ctx, build, served, start)
	}
	return d.generations(ctx, full, served, start)
}

// world is the job's gang at one size: its plan, slots and tasks.
type world struct {
	n      int
	plan   *feed.JobPlan
	target int64
	slots  []slot
	tasks  taskBuilder
	// rows collects the workers' rows when the plan does not know them
	// and they must keep in step (FeedRows); nil otherwise. It outlives
	// generations: a rank run again has the same splits.
	rows *feed.RowTally
}

// genStart is where a generation starts: the checkpoint its processes
// load and where each rank's feed starts (nil: afresh).
type genStart struct {
	checkpoint string
	step       int64
	feed       []*rankStart // by rank; nil for a rank without a position
}

// rankStart is where one rank's feed starts.
type rankStart struct {
	epoch int
	batch int64
	// rest, when set, deals epoch epoch as segments of the epochs of an
	// earlier world's ranks, padded to restBatches batches.
	hasRest     bool
	rest        []feed.Segment
	restBatches int64
}

// generation runs one gang of the job (the first, or a restart's) to its
// end. launched says whether its executors were started, so that a
// failure to get them is not taken for a training failure.
func (d *Driver) generation(ctx context.Context, gen int, w *world, served map[string]string, start time.Time,
	rc *restartCounts, from *genStart, requestTimeout time.Duration) (launched bool, err error) {
	c := d.cfg
	tasks := w.tasks
	slots := generationSlots(w.slots, gen)
	lis, err := net.Listen("tcp", net.JoinHostPort(c.ListenHost, strconv.Itoa(c.Port)))
	if err != nil {
		return false, fmt.Errorf("listen for executors on %s:%d: %w", c.ListenHost, c.Port, err)
	}
	g := d.generationRoster(slots, rc)
	stopServer := make(chan struct{})
	dealCtx, cancelDeals := context.WithCancel(ctx)
	var inPlace *inPlaceFeed
	var gate *epochGate
	if g.shrinkWorkers {
		if inPlace = d.inPlaceFeedFor(dealCtx, g, stopServer); inPlace != nil {
			gate = inPlace.gate
		}
	}
	var calls *rpc.Metrics
	if d.obs != nil {
		calls = d.obs.rpc
	}
	srv := rpc.NewServer(rpc.ServerConfig{Logger: d.logger, Metrics: calls, Options: append(append(d.signer.ServerOptions(), d.tls.serverOptions()...), newSpecCodec().serverOption())})
	taskFrom := func(rank int, from *genStart) (*driverpb.Task, error) {
		t, err := tasks(rank)
		if t != nil {
			resumeTask(t, gen, rank, from)
			t.ReplacesWorkers = g.replaceWorkers || g.shrinkWorkers || g.growWorkers
			if inPlace != nil && t.Feed.GetMode() != "" {
				t.Feed.HoldEpochs = true
				t.Feed.HoldForProcess = sameBatches(w.plan, c.BatchRows, c.EvenBatches) &&
					(c.EvenBatches != feed.EvenOff || !t.Feed.GetHasRest())
			}
		}
		return t, err
	}
	// A replacement worker resumes from the newest complete checkpoint
	// when it registers, not the generation's.
	replacementTask := func(ctx context.Context, rank, replacement int) (*driverpb.Task, error) {
		now, err := d.replacementStart(ctx, w.slots, gen, rank, replacement)
		if err != nil {
			return nil, err
		}
		return taskFrom(rank, now)
	}
	// A newcomer's task is a worker's of the generation (it has no input),
	// marked as a replacement's: it has no state, and takes the running
	// ranks' (task.CatchUp).
	newcomerTask := func(rank int) (*driverpb.Task, error) {
		t, err := taskFrom(min(rank, len(w.slots)-1), from)
		if t != nil {
			t.Replacement = 1
		}
		return t, err
	}
	keeper, _ := d.cm.(CredentialKeeper)
	cs := &controlServer{roster: g, tasks: func(rank int) (*driverpb.Task, error) { return taskFrom(rank, from) },
		replacementTask: replacementTask, newcomerTask: newcomerTask, stop: stopServer, logger: d.logger, obs: d.obs, served: served,
		requireTLS: d.tls != nil, creds: keeper, rows: w.rows, gate: gate, inPlace: inPlace}
	d.growAtEpochEnds(g, inPlace, cs, func(rank int) (*driverpb.Task, error) { return taskFrom(min(rank, len(w.slots)-1), from) })
	driverpb.RegisterControlServer(srv, cs)

	var eg errgroup.Group
	eg.Go(func() error {
		if err := srv.Serve(lis); err != nil && !errors.Is(err, grpc.ErrServerStopped) {
			return fmt.Errorf("control plane: %w", err)
		}
		return nil
	})
	defer func() {
		close(stopServer)
		cancelDeals()
		if inPlace != nil {
			inPlace.wait()
		}
		srv.Stop()
		_ = eg.Wait()
	}()

	addr, err := advertiseAddr(c.AdvertiseHost, lis.Addr().(*net.TCPAddr))
	if err != nil {
		return false, err
	}
	if c.AdvertisePort > 0 {
		host, _, _ := net.SplitHostPort(addr)
		addr = net.JoinHostPort(host, strconv.Itoa(c.AdvertisePort))
	}
	d.logger.Info("control plane listening", "addr", lis.Addr().String(), "advertised", addr, "generation", gen)
	launched, runErr := d.watch(ctx, g, d.executorSpecs(slots, w.plan, addr, rc), start, requestTimeout)
	if err := d.release(); err != nil {
		d.logger.Warn("release executors", "err", err)
	}
	return launched, runErr
}

// executorSpecs is what the cluster manager starts for the generation's
// slots: executors that reach the control plane at addr, each feeding
// rank placed near its splits where the manager can.
func (d *Driver) executorSpecs(slots []slot, plan *feed.JobPlan, addr string, rc *restartCounts) []ExecutorSpec {
	specs := make([]ExecutorSpec, len(slots))
	for i, s := range slots {
		specs[i] = ExecutorSpec{
			ID:       s.id,
			Role:     s.role,
			Args:     d.executorArgs(addr, s.id),
			Env:      d.executorEnv(),
			Cores:    s.spec.Cores,
			MemoryMB: s.spec.MemoryMB,
			GPUs:     s.spec.GPUs,

			SharedMemoryMB: d.cfg.SharedFeedMB(s.role),

			ExcludedHosts: slices.Clone(rc.excluded),
		}
		if s.role.Feeds() && s.roleRank < len(plan.Ranks) {
			specs[i].PreferredHosts = preferredHosts(plan.Ranks[s.roleRank])
		}
	}
	return specs
}

// generationRoster is the roster of a generation of slots, with the
// failure policy's ways of keeping the other ranks running.
func (d *Driver) generationRoster(slots []slot, rc *restartCounts) *roster {
	c := d.cfg
	g := newRosterOf(slots)
	g.rootCauseGrace = rootCauseGrace
	if c.PS.Count > 0 && c.PS.Builtin {
		g.psSpares = min(c.PSReplicas, c.PS.Count-1)
		g.onPSLost = func(msg string) { d.logger.Warn(msg) }
	}
	if c.replacesWorkers(slots) {
		g.replaceWorkers, g.budget, g.onReplace = true, d.replacementBudget(rc), d.sayReplacing
	}
	d.shrunk.Store(0)
	d.grown.Store(0)
	if ok, why := c.shrinksInPlace(slots); ok {
		g.shrinkWorkers, g.minWorkers, g.budget, g.onShrink = true, c.MinExecutors, d.replacementBudget(rc), d.sayShrinking
	} else if why != "" {
		d.logger.Warn("spindle.failure.shrinkInPlace: a lost worker restarts the gang smaller rather than leaving the others running", "why", why)
	}
	if c.growsInPlace(slots) {
		g.growWorkers, g.maxWorkers, g.onGrow = true, c.NumExecutors, d.sayGrown
	}
	return g
}

// resumeTask stamps rank's task with its generation and, when the
// generation resumes, the checkpoint and the rank's feed position.
func resumeTask(t *driverpb.Task, gen, rank int, from *genStart) {
	t.Generation = int32(gen)
	if from == nil {
		return
	}
	t.ResumeCheckpoint, t.ResumeStep = from.checkpoint, from.step
	if rank < len(from.feed) && from.feed[rank] != nil && t.Feed.GetMode() != "" {
		rs := from.feed[rank]
		t.Feed.StartEpoch, t.Feed.StartBatch = int32(rs.epoch), rs.batch
		if rs.hasRest {
			t.Feed.HasRest, t.Feed.Rest, t.Feed.RestBatches = true, driverpb.SegmentsFromFeed(rs.rest), rs.restBatches
		}
	}
}

// executorArgs are the spindle arguments that run one executor.
func (d *Driver) executorArgs(addr, id string) []string {
	args := []string{"executor", "--driver", addr, "--id", id, "--job", d.cfg.JobID, "--log-level", d.cfg.LogLevel,
		"--register-timeout", d.cfg.RegistrationTimeout.String()}
	if d.cfg.NetworkInterface != "" {
		args = append(args, "--interface", d.cfg.NetworkInterface)
	}
	if len(d.cfg.Archives) > 0 && d.cfg.ArchivesMaxBytes > 0 {
		args = append(args, "--archives-max-bytes", strconv.FormatInt(d.cfg.ArchivesMaxBytes, 10))
	}
	if len(d.cfg.Archives) > 0 && d.cfg.ArchivesMaxEntries > 0 {
		args = append(args, "--archives-max-entries", strconv.Itoa(d.cfg.ArchivesMaxEntries))
	}
	return args
}

// watch requests the gang and follows it to the job's end.
func (d *Driver) watch(ctx context.Context, g *roster, specs []ExecutorSpec, start time.Time, requestTimeout time.Duration) (launched bool, err error) {
	reqCtx, cancel := context.WithTimeout(ctx, requestTimeout)
	defer cancel()
	if err := d.cm.Request(reqCtx, specs); err != nil {
		if ctx.Err() != nil {
			return false, ErrInterrupted
		}
		return false, fmt.Errorf("get %d executors: %w", len(specs), err)
	}
	return true, d.follow(ctx, g, specs, start)
}

// follow follows a launched gang to its end.
func (d *Driver) follow(ctx context.Context, g *roster, specs []ExecutorSpec, start time.Time) error {
	c := d.cfg
	d.logger.Info("executors launched", "count", len(specs), "after", time.Since(start).Round(time.Millisecond))

	prog := newProgress(c.Console, c.ProgressInterval, c.Epochs, d.expectRows)
	defer prog.finish()
	shown := newClusterProgress(d.cm, d.expectRows)
	// Replacements for dead parameter servers start in the background;
	// they end with the job.
	var replacing sync.WaitGroup
	replaceCtx, stopReplacing := context.WithCancel(ctx)
	defer func() { stopReplacing(); replacing.Wait() }()
	registration := time.NewTimer(c.RegistrationTimeout)
	defer registration.Stop()
	tick := time.NewTicker(c.HeartbeatInterval / 2)
	defer tick.Stop()
	ready := g.ready
	idle := time.Now() // when the loop last finished its work
	for {
		select {
		case <-ready:
			d.logger.Info("all executors registered; cluster spec published", "after", time.Since(start).Round(time.Millisecond))
			ready = nil
			registration.Stop()
		case <-registration.C:
			g.fail(fmt.Errorf("gang registration timed out after %s: %s", c.RegistrationTimeout, g.missing()))
		case ev := <-d.cm.Events():
			switch ev.Kind {
			case ExecutorStarted:
				g.placed(ev)
			case ExecutorExited, ExecutorLost:
				g.executorGone(ev)
			}
		case lost := <-g.lost:
			if lost.role == RoleWorker {
				replacing.Go(func() { d.replaceWorker(replaceCtx, g, specs, lost) })
				break
			}
			replacing.Go(func() { d.replacePS(replaceCtx, g, specs, lost) })
		case now := <-tick.C:
			d.forgiveHeldUp(g, idle, c.HeartbeatInterval/2)
			g.checkHeartbeats(c.HeartbeatTimeout)
			if d.grow != nil && ready == nil && d.grow(ctx) {
				g.fail(errGrow)
			}
			if d.growRoom != nil && ready == nil {
				d.growInPlace(replaceCtx, g, specs[0], replacing.Go)
			}
			snap := g.snapshot()
			prog.update(now, snap)
			d.obs.progress(now, snap)
			showLocalizing(d.cm, snap)
			if err := shown.update(ctx, now, snap); err != nil {
				d.logger.Debug("could not show the job's progress to the cluster manager", "err", err)
			}
		case <-g.failed:
			// The caller prints the error once; logging it here too would
			// repeat the rank's stderr a second time.
			err := g.err()
			d.logger.Debug("job failed", "err", err)
			if errors.Is(err, errGrow) {
				return err
			}
			if others := len(specs) - 1; others > 0 && c.Console != nil {
				prog.finish()
				c.Console.Eprintln(fmt.Sprintf("job failed; stopping the other %d executors (their training processes get %s to exit)", others, c.StopGrace))
			}
			return err
		case <-g.succeeded:
			snap := g.snapshot()
			prog.update(time.Now(), snap)
			d.obs.progress(time.Now(), snap)
			prog.finish()
			d.stopTheRest(ctx, g)
			attrs := []any{"ranks", len(specs), "rows", prog.totalRows(), "elapsed", time.Since(start).Round(time.Millisecond)}
			if stopped := g.stoppedAtEnd(); len(stopped) > 0 {
				attrs = append(attrs, "stopped_at_end", strings.Join(stopped, ", "))
			}
			d.logger.Info("job succeeded", attrs...)
			return nil
		case <-ctx.Done():
			g.stop("job interrupted")
			if c.Console != nil {
				prog.finish()
				line := fmt.Sprintf("interrupted: stopping every executor; training processes get %s to exit", c.StopGrace)
				if c.ForceStop != nil {
					// Only a driver in a terminal's process takes a second
					// Ctrl-C; one in a YARN ApplicationMaster was killed.
					line += " (Ctrl-C again to stop at once)"
				}
				c.Console.Eprintln(line)
			}
			return ErrInterrupted
		}
		idle = time.Now()
	}
}

// forgiveHeldUp moves every executor's last heartbeat later by as long as
// the driver's checks, run every period and last free at idle, were held
// up: this process was starved or stopped, and the executors' silence in
// that time is its own.
func (d *Driver) forgiveHeldUp(g *roster, idle time.Time, period time.Duration) {
	held := liveness.HeldUp(idle, time.Now(), period)
	if held == 0 {
		return
	}
	d.logger.Warn("the driver's heartbeat checks were held up; the executors' silence in that time is not held against them",
		"held_up", held.Round(time.Millisecond))
	g.forgive(held)
}

// replacePS starts a replacement for a dead parameter server, which
// rejoins the ring and takes its rows back from the servers that stood in
// for it. Without one, the job goes on with a spare fewer.
func (d *Driver) replacePS(ctx context.Context, g *roster, specs []ExecutorSpec, lost *member) {
	m := g.addReplacement(lost)
	if m == nil {
		return
	}
	spec := specs[lost.rank]
	spec.ID = m.id
	spec.Args = slices.Clone(spec.Args)
	for i := range spec.Args[:len(spec.Args)-1] {
		if spec.Args[i] == "--id" {
			spec.Args[i+1] = m.id
		}
	}
	d.logger.Info("starting a replacement parameter server", "ps", lost.roleRank, "replaces", lost.id, "executor", m.id)
	ctx, cancel := context.WithTimeout(ctx, d.cfg.RegistrationTimeout)
	defer cancel()
	if err := d.cm.Request(ctx, []ExecutorSpec{spec}); err != nil {
		g.dropReplacement(m)
		if ctx.Err() == nil || errors.Is(ctx.Err(), context.DeadlineExceeded) {
			d.logger.Warn("no replacement parameter server: the job goes on with one spare fewer", "ps", lost.roleRank, "err", err)
		}
	}
}

// stopTheRest waits, after the job succeeded, for the executors still
// running (parameter servers, workers a chief left behind) to stop their
// processes: their next heartbeat tells them the job finished, and they
// report their exit. What is left after a heartbeat and the stop grace
// period is released by the cluster manager all the same.
func (d *Driver) stopTheRest(ctx context.Context, g *roster) {
	running := g.running()
	if len(running) == 0 {
		return
	}
	d.logger.Info("job ended; stopping the executors still running", "executors", strings.Join(running, ", "))
	wait := time.NewTimer(2*d.cfg.HeartbeatInterval + d.cfg.StopGrace + time.Second)
	defer wait.Stop()
	for {
		select {
		case <-g.allExited:
			return
		case ev := <-d.cm.Events():
			if ev.Kind == ExecutorExited || ev.Kind == ExecutorLost {
				g.executorGone(ev)
			}
		case <-wait.C:
			return
		case <-ctx.Done():
			return
		}
	}
}

// release stops every executor still running, giving training processes
// their grace period.
func (d *Driver) release() error {
	// The job's own context may be gone (Ctrl-C): cleaning up must not be,
	// unless told to hurry (a second Ctrl-C), when the cluster manager
	// kills what is left at once.
	ctx, cancel := context.WithTimeout(context.Background(), d.cfg.StopGrace+10*time.Second)
	defer cancel()
	if force := d.cfg.ForceStop; force != nil {
		done := make(chan struct{})
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			select {
			case <-force:
				cancel()
			case <-done:
			}
		}()
		defer wg.Wait()
		defer close(done)
	}
	return d.cm.Release(ctx, nil)
}

// taskBuilder prepares the per-rank task JSON. Workers get their share of
// the plan (worker i the splits planned for rank i); the other roles get
// no feed, and their role's command when it has one.
func (d *Driver) taskBuilder(plan *feed.JobPlan, target int64, slots []slot, files, pyFiles, archives []string) (taskBuilder, error) {
	c := d.cfg
	// Executors on one machine split its GPUs by rank, each role taking
	// its own number; a cluster manager that assigns devices itself
	// overrides this through the executor's own CUDA_VISIBLE_DEVICES.
	firstGPU := make([]int, len(slots))
	for i := 1; i < len(slots); i++ {
		firstGPU[i] = firstGPU[i-1] + slots[i-1].spec.GPUs
	}
	var schemaIPC []byte
	if plan.Schema != nil {
		var buf bytes.Buffer
		w := ipc.NewWriter(&buf, ipc.WithSchema(plan.Schema))
		if err := w.Close(); err != nil {
			return nil, fmt.Errorf("encode schema: %w", err)
		}
		schemaIPC = buf.Bytes()
	}
	// Pushed input is kept even by the driver as it deals the rows: the
	// ranks feed what they get.
	evenOnRanks := c.EvenBatches
	if d.push != nil {
		evenOnRanks = feed.EvenOff
	}
	return func(rank int) (*driverpb.Task, error) {
		if rank < 0 || rank >= len(slots) {
			return nil, fmt.Errorf("no rank %d in a job of %d", rank, len(slots))
		}
		s := slots[rank]
		// The feed is planned for workers: feedRank is this worker's share.
		feedRank := s.roleRank
		if !s.role.Feeds() {
			feedRank = 0
		}
		t := &driverpb.Task{
			JobId:                   c.JobID,
			Command:                 c.Command,
			Env:                     c.Env,
			Dir:                     c.Dir,
			Files:                   files,
			Archives:                archives,
			PyFiles:                 pyFiles,
			Python:                  c.Python,
			CheckpointDir:           c.CheckpointDir,
			CheckpointKeep:          int32(c.CheckpointKeep),
			PythonPath:              c.PythonPath,
			HadoopConfDir:           c.HadoopConfDir,
			HadoopUser:              c.HadoopUser,
			HeartbeatIntervalMillis: c.HeartbeatInterval.Milliseconds(),
			DriverTimeoutMillis:     c.HeartbeatTimeout.Milliseconds(),
			StopGraceMillis:         c.StopGrace.Milliseconds(),
			StderrTailLines:         int32(c.StderrTailLines),
			CollectiveTimeoutMillis: c.CollectiveTimeout.Milliseconds(),
			RdmaMode:                c.RDMAMode,
			RdmaDevices:             c.RDMADevices,
			ForwardOutput:           !outputReachesConsole(d.cm),
			Timeline:                c.Timeline != "",
			HadoopConfFiles:         d.hadoopConf,
			Feed:                    feedTask(c, plan, feedRank, schemaIPC, evenOnRanks, target),
		}
		if c.PS.Count > 0 && c.PS.Builtin {
			t.PsStaleness, t.PsWaitTimeoutMillis, t.PsMemoryMb = c.PSStaleness, c.PSWaitTimeout.Milliseconds(), int64(c.PS.MemoryMB)
			t.PsReplicas = int32(c.PSReplicas)
		}
		if s.spec.Builtin {
			t.BuiltinPs = true
			t.Command = []string{"spindle", "ps", "serve"}
		}
		if len(s.spec.Command) > 0 {
			t.Command = s.spec.Command
		}
		if !s.role.Feeds() || len(c.Inputs) == 0 {
			t.Feed = &driverpb.FeedTask{} // no mode: no feed
		}
		for i := 0; i < s.spec.GPUs; i++ {
			t.Gpus = append(t.Gpus, int32(firstGPU[rank]+i))
		}
		return t, nil
	}, nil
}

// feedTask is what the worker of feedRank feeds: its splits of plan, how
// they are read and dealt, and the epoch's rows. evenOnRanks is how the
// ranks keep their batches even (off for pushed input, which the driver
// deals evenly itself).
func feedTask(c Config, plan *feed.JobPlan, feedRank int, schemaIPC []byte, evenOnRanks feed.EvenMode, target int64) *driverpb.FeedTask {
	return &driverpb.FeedTask{
		Mode:              c.FeedMode,
		Splits:            driverpb.SplitsFromFeed(plan.Ranks[feedRank]),
		Schema:            schemaIPC,
		Columns:           c.Columns,
		LabelColumn:       c.LabelColumn,
		Csv:               driverpb.CSVFromFeed(c.CSV),
		BatchRows:         int32(c.BatchRows),
		Epochs:            int32(c.Epochs),
		Shuffle:           c.Shuffle,
		Seed:              c.Seed,
		ShuffleBufferRows: int32(c.ShuffleBufferRows),
		PrefetchBatches:   int32(c.PrefetchBatches),
		MemoryBudget:      c.MemoryBudget,
		CacheBytes:        c.CacheMemory,
		SpillBytes:        c.SpillDisk,
		NoSharedMemory:    !c.SharedMemory,
		EvenBatches:       string(evenOnRanks),
		TargetBatches:     target,
		FlightToken:       c.Flight.Token,
		FlightCaFile:      c.Flight.CAFile,
		EpochRows:         feed.EvenRows(plan.RowsPerRank, feedRank, c.BatchRows, c.EvenBatches),
		AgreeRows:         plan.RowsUnknown && evenOnRanks != feed.EvenOff,
		TurnEpochs:        int32(c.FlightPut.TurnEpochs),
	}
}

// preferredHosts returns the hosts holding most of a rank's splits.
func preferredHosts(splits []feed.Split) []string {
	rows := map[string]int64{}
	var order []string
	for _, s := range splits {
		for _, h := range s.Hosts {
			if _, ok := rows[h]; !ok {
				order = append(order, h)
			}
			rows[h] += s.Rows
		}
	}
	for i := 1; i < len(order); i++ {
		for j := i; j > 0 && rows[order[j]] > rows[order[j-1]]; j-- {
			order[j], order[j-1] = order[j-1], order[j]
		}
	}
	if len(order) > 3 {
		order = order[:3]
	}
	return order
}
