package scaletest

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/envcontract"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/yarntest"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

// YARNOptions shape one run of a job against the real ApplicationMaster.
type YARNOptions struct {
	// Ranks is the job's world size; RanksPerNode how many executor
	// containers each simulated NodeManager holds (0: 8).
	Ranks, RanksPerNode int
	// GrantsPerNode is how many containers a node grants per allocate
	// call (0: 2), so the gang is granted over several round trips.
	GrantsPerNode int
	// NodeHeartbeat, when positive, has the ResourceManager grant only on
	// each node's heartbeat, once per NodeHeartbeat, as YARN does
	// (yarntest.Config.NodeHeartbeat); zero grants on each allocate call.
	NodeHeartbeat time.Duration
	// StartLatency is each container's start time on its node (0: 500ms).
	StartLatency time.Duration
	// Dir holds the test YARN's directories.
	Dir string
}

// YARNResult is what one run against the ApplicationMaster measured.
type YARNResult struct {
	Ranks, Nodes int
	// AllocateCalls is the AM's allocate round trips from its gang
	// request to the whole gang held; GangHeld that time.
	AllocateCalls int
	GangHeld      time.Duration
	// Launched is from the gang held to every container started on its
	// NodeManager (the AM's startContainers calls).
	Launched time.Duration
	// SubmitToRegistered is from the application's submission to the
	// last rank's registration answered by the driver.
	SubmitToRegistered time.Duration
	// CPU is this process's CPU time (the AM, the driver, the test
	// ResourceManager and NodeManagers, the simulated executors) from the
	// submission to every rank registered; AMCPU the part of it from the
	// gang request to the gang held, when only the AM and the
	// ResourceManager work.
	CPU, AMCPU time.Duration
	// RSSBytes is this process's resident size once every rank registered.
	RSSBytes int64
}

// yarnRun is one job: the cluster's Launcher and the AM's launch contexts.
type yarnRun struct {
	sw            *swarm
	amToken       chan hadooprpc.Token
	cmds          sync.Map // executor id -> command
	registered    atomic.Int64
	allRegistered chan struct{}
	ranks         int64

	// Under mu: the gang asked for (at, allocate calls so far, process
	// CPU), held (the first launch context built) and started (Request
	// returned).
	mu        sync.Mutex
	alloc     *am.Allocator
	askedAt   time.Time
	asked     int
	heldAt    time.Time
	held      int
	cpuAsked  time.Duration
	cpuHeld   time.Duration
	startedAt time.Time
	// lastAt, cpuAt and rss are taken when every rank registered, by the
	// goroutine that then reads them.
	lastAt time.Time
	cpuAt  time.Duration
	rss    int64
}

// Launch runs a simulated container: the AM's hands its token to the run,
// an executor's speaks the control plane to the driver until it ends.
func (r *yarnRun) Launch(ctx context.Context, l yarntest.Launch) int32 {
	if l.AM {
		select {
		case r.amToken <- l.AMRMToken:
		default:
		}
		<-ctx.Done()
		return 0
	}
	v, ok := r.cmds.Load(l.Env["SPINDLE_EXECUTOR_ID"])
	if !ok {
		return 1
	}
	c := v.(command)
	c.Host = fmt.Sprintf("worker-%04d.rack%02d.cluster.example.com", l.Node, l.Node/40)
	_, code, _ := r.sw.execute(ctx, c)
	return int32(code)
}

// launchContext records an executor's control-plane command and is the
// first sign that the AM holds the whole gang (it builds launch contexts
// only then).
func (r *yarnRun) launchContext(hb time.Duration) func(driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error) {
	return func(s driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error) {
		r.mu.Lock()
		if r.heldAt.IsZero() {
			r.heldAt, r.cpuHeld = time.Now(), processCPU()
			r.held = r.alloc.AllocateCalls()
		}
		r.mu.Unlock()
		id := argValue(s.Args, "--id")
		r.cmds.Store(id, command{Op: "start", ID: id, Driver: argValue(s.Args, "--driver"), Secret: s.Env[envcontract.JobSecret],
			Heartbeat: hb.Milliseconds()})
		return &pb.ContainerLaunchContextProto{Command: []string{"spindle executor"},
			Environment: []*pb.StringStringMapProto{{Key: proto.String("SPINDLE_EXECUTOR_ID"), Value: proto.String(id)}}}, nil
	}
}

// timedAM is the driver's cluster manager: the AM, its gang request timed.
type timedAM struct {
	*am.Allocator
	r *yarnRun
}

func (t timedAM) Request(ctx context.Context, specs []driver.ExecutorSpec) error {
	t.r.mu.Lock()
	t.r.askedAt, t.r.cpuAsked, t.r.asked = time.Now(), processCPU(), t.Allocator.AllocateCalls()
	t.r.mu.Unlock()
	err := t.Allocator.Request(ctx, specs)
	t.r.mu.Lock()
	t.r.startedAt = time.Now()
	t.r.mu.Unlock()
	return err
}

// RunYARN runs one job of opts.Ranks simulated executors through the real
// ApplicationMaster's allocator against the test YARN with simulated
// NodeManagers, and the real driver, all in this process.
func RunYARN(ctx context.Context, opts YARNOptions) (*YARNResult, error) {
	if opts.RanksPerNode <= 0 {
		opts.RanksPerNode = 8
	}
	if opts.GrantsPerNode <= 0 {
		opts.GrantsPerNode = 2
	}
	if opts.StartLatency <= 0 {
		opts.StartLatency = 500 * time.Millisecond
	}
	dcfg := driver.DefaultConfig()
	r := &yarnRun{amToken: make(chan hadooprpc.Token, 1), allRegistered: make(chan struct{}), ranks: int64(opts.Ranks),
		sw: &swarm{finish: make(chan struct{}), stops: map[string]context.CancelFunc{}}}
	r.sw.onReport = func(rep report) {
		if rep.Ev == "registered" && r.registered.Add(1) == r.ranks {
			close(r.allRegistered)
		}
	}
	nodes := (opts.Ranks+opts.RanksPerNode-1)/opts.RanksPerNode + 1 // one more for the AM
	cl, err := yarntest.Start(ctx, yarntest.Config{Dir: opts.Dir, NodeManagers: nodes, NodeMemoryMB: 1 << 20,
		NodeVCores: opts.RanksPerNode, Launcher: r, StartLatency: opts.StartLatency, GrantsPerNode: opts.GrantsPerNode,
		NodeHeartbeat: opts.NodeHeartbeat})
	if err != nil {
		return nil, fmt.Errorf("scaletest: start the test YARN of %d nodes: %w", nodes, err)
	}
	defer cl.Close()
	res := &YARNResult{Ranks: opts.Ranks, Nodes: nodes}
	start, cpu0 := time.Now(), processCPU()
	if err := submitAM(ctx, cl); err != nil {
		return nil, err
	}
	var tok hadooprpc.Token
	select {
	case tok = <-r.amToken:
	case <-ctx.Done():
		return nil, fmt.Errorf("scaletest: wait for the AM container: %w", ctx.Err())
	}
	alloc, err := am.Start(ctx, am.Config{SchedulerAddrs: []string{cl.SchedulerAddr()}, AMRMToken: tok, Host: "127.0.0.1",
		Port: 4040, MemoryOverheadMB: 128, GangTimeout: 10 * time.Minute, LaunchContext: r.launchContext(dcfg.HeartbeatInterval),
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))})
	if err != nil {
		return nil, fmt.Errorf("scaletest: start the ApplicationMaster: %w", err)
	}
	defer alloc.Close()
	r.mu.Lock()
	r.alloc = alloc
	r.mu.Unlock()
	if err := runDriver(ctx, dcfg, opts.Ranks, timedAM{alloc, r}, r); err != nil {
		return nil, err
	}
	r.mu.Lock()
	res.AllocateCalls, res.GangHeld, res.AMCPU = r.held-r.asked, r.heldAt.Sub(r.askedAt), r.cpuHeld-r.cpuAsked
	res.Launched = r.startedAt.Sub(r.heldAt)
	r.mu.Unlock()
	res.SubmitToRegistered, res.CPU, res.RSSBytes = r.lastAt.Sub(start), r.cpuAt-cpu0, r.rss
	fctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := alloc.Finish(fctx, pb.FinalApplicationStatusProto_APP_SUCCEEDED, ""); err != nil {
		return nil, fmt.Errorf("scaletest: unregister the ApplicationMaster: %w", err)
	}
	return res, nil
}

// submitAM submits the application whose AM container hands its token to
// the run.
func submitAM(ctx context.Context, cl *yarntest.Cluster) error {
	rm, err := client.New(client.Config{RMAddrs: []string{cl.Addr()}, User: "scale", Rounds: 1})
	if err != nil {
		return fmt.Errorf("scaletest: connect to the test ResourceManager: %w", err)
	}
	defer rm.Close()
	id, _, err := rm.NewApplication(ctx)
	if err != nil {
		return fmt.Errorf("scaletest: new application: %w", err)
	}
	sc := &pb.ApplicationSubmissionContextProto{
		ApplicationId: id.Proto(), ApplicationName: proto.String("scale"), Queue: proto.String("default"),
		AmContainerSpec: &pb.ContainerLaunchContextProto{Command: []string{"spindle am"}},
		MaxAppAttempts:  proto.Int32(1),
		Resource:        &pb.ResourceProto{Memory: proto.Int64(1024), VirtualCores: proto.Int32(1)},
		ApplicationType: proto.String("SPINDLE"),
	}
	if err := rm.Submit(ctx, sc); err != nil {
		return fmt.Errorf("scaletest: submit application %s: %w", id, err)
	}
	return nil
}

// runDriver runs the job's real driver over cm until every rank
// registered (when r takes its measures), then ends the job well.
func runDriver(ctx context.Context, cfg driver.Config, ranks int, cm driver.ClusterManager, r *yarnRun) error {
	cfg.AppName = fmt.Sprintf("scale-yarn-%d", ranks)
	cfg.NumExecutors = ranks
	cfg.Command = []string{"python3", "train.py"}
	cfg.ListenHost = "127.0.0.1"
	cfg.UIEnabled = false
	cfg.RegistrationTimeout = 10 * time.Minute
	cfg.HeartbeatTimeout = max(cfg.HeartbeatTimeout, time.Minute)
	cfg.Console = nil
	cfg.Logger = slog.New(slog.DiscardHandler)
	d, err := driver.New(cfg, cm)
	if err != nil {
		return fmt.Errorf("scaletest: new driver: %w", err)
	}
	defer d.Close()
	runCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	var runErr error
	ended := make(chan struct{})
	var wg sync.WaitGroup
	defer wg.Wait()
	wg.Go(func() { runErr = d.Run(runCtx); close(ended) })
	select {
	case <-r.allRegistered:
		r.lastAt, r.cpuAt, r.rss = time.Now(), processCPU(), residentBytes()
	case <-ended:
		return fmt.Errorf("scaletest: the %d-rank job ended before every rank registered (%d did): %v", ranks, r.registered.Load(), runErr)
	case <-ctx.Done():
		cancel()
		<-ended
		return fmt.Errorf("scaletest: wait for %d ranks to register (%d did): %w", ranks, r.registered.Load(), ctx.Err())
	}
	r.sw.once.Do(func() { close(r.sw.finish) })
	<-ended
	if runErr != nil {
		return fmt.Errorf("scaletest: the %d-rank job: %w", ranks, runErr)
	}
	return nil
}
