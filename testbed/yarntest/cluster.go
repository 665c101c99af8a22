package yarntest

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/client"
)

// containerTokenLife is how long an allocated container may wait to be
// started (yarn.resourcemanager.rm.container-allocation.expiry-interval-ms).
const containerTokenLife = 10 * time.Minute

// Cluster is a running test YARN: a ResourceManager (client and scheduler
// ports) and several NodeManagers, all in this process, running
// containers as local processes.
type Cluster struct {
	cfg Config
	log *slog.Logger
	now func() time.Time

	rmAddr, schedAddr string
	rmSrv, schedSrv   *hadooprpc.Server
	clusterTS         int64

	mu            sync.Mutex
	nodes         []*nodeManager
	queues        map[string]*queue
	apps          map[int32]*app
	nextApp       int32
	amrmKeys      *keyRing
	nmKeys        *keyRing
	containerKeys *keyRing
	wrongAMRM     bool
	wrongNM       bool
	closed        bool
	// granted counts each node's containers in the allocate call (or
	// node heartbeat) being answered, when Config.GrantsPerNode limits
	// them.
	granted map[*nodeManager]int
	// beating is the node whose heartbeat is being answered, the only
	// one that may grant then (Config.NodeHeartbeat); nodeBeats counts
	// the heartbeats.
	beating   *nodeManager
	nodeBeats int
	// startCalls counts startContainers calls (StartCalls).
	startCalls int

	kick   chan struct{}
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// queue is a scheduler queue and what its applications use.
type queue struct {
	cfg        QueueConfig
	usedMB     int64
	usedVCores int64
}

// app is an application as the ResourceManager knows it.
type app struct {
	id          *pb.ApplicationIdProto
	name        string
	user        string
	queue       string
	appType     string
	tags        []string
	priority    int32
	sc          *pb.ApplicationSubmissionContextProto
	submitted   bool
	state       pb.YarnApplicationStateProto
	final       pb.FinalApplicationStatusProto
	diagnostics string
	start       time.Time
	finish      time.Time
	attempt     int32
	maxAttempts int32

	// The current attempt.
	amc          *container
	registered   bool
	unregistered bool
	host         string
	rpcPort      int32
	trackingURL  string
	progress     float32
	responseID   int32
	lastResp     *pb.AllocateResponseProto
	amrmKeyID    int32            // the key of the AMRMToken the attempt holds
	nmTokensFor  map[string]int32 // node -> NM key of the NMToken the attempt holds
	asks         map[askKey]*pb.ResourceRequestProto
	blacklist    map[string]bool       // hosts the attempt asked to get no containers on
	containers   map[string]*container // by id, the attempt's live non-AM containers
	allocated    []*container          // not yet handed to the AM
	completed    []*pb.ContainerStatusProto
	lostNodes    []*nodeManager
	nextSeq      int64
}

type askKey struct {
	priority int32
	resource string
}

func (a *app) idString() string { return client.AppIDFromProto(a.id).String() }

func (a *app) attemptID() *pb.ApplicationAttemptIdProto {
	return &pb.ApplicationAttemptIdProto{ApplicationId: a.id, AttemptId: proto.Int32(a.attempt)}
}

func (a *app) attemptString() string { return client.AttemptString(a.attemptID()) }

func (a *app) ended() bool { return client.IsFinal(a.state) }

// Start starts a test YARN as cfg describes; zero fields take DefaultConfig
// values. ctx bounds the start only; the cluster runs until Close.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("yarntest: create %s: %w", cfg.Dir, err)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Cluster{
		cfg: cfg, log: log.With("component", "yarntest"), now: time.Now, clusterTS: time.Now().UnixMilli(),
		queues: map[string]*queue{}, apps: map[int32]*app{}, nextApp: 1,
		amrmKeys: newKeyRing(), nmKeys: newKeyRing(), containerKeys: newKeyRing(), kick: make(chan struct{}, 1),
	}
	for _, q := range cfg.Queues {
		c.queues[q.Name] = &queue{cfg: q}
	}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.startRM(); err != nil {
		c.Close()
		return nil, err
	}
	for i, nc := range cfg.Nodes {
		n, err := c.startNode(i, nc)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.nodes = append(c.nodes, n)
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.scheduleLoop()
	}()
	if cfg.NodeHeartbeat > 0 {
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			c.heartbeatLoop()
		}()
	}
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	c.log.Info("test yarn started", "resourcemanager", c.rmAddr, "scheduler", c.schedAddr, "nodemanagers", len(c.nodes))
	return c, nil
}

// NewTestCluster starts a cluster for a test, in a temporary directory
// when cfg.Dir is empty, and closes it when tb ends.
func NewTestCluster(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("start test yarn: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func (c *Cluster) listen(port int) (net.Listener, error) {
	addr := net.JoinHostPort(c.cfg.Host, strconv.Itoa(port))
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("yarntest: listen on %s: %w", addr, err)
	}
	return ln, nil
}

func (c *Cluster) serve(srv *hadooprpc.Server, ln net.Listener, ctx context.Context) {
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		if err := srv.Serve(ctx, ln); err != nil {
			c.log.Error("server stopped", "addr", ln.Addr(), "err", err)
		}
	}()
}

func (c *Cluster) startRM() error {
	ln, err := c.listen(c.cfg.RMPort)
	if err != nil {
		return err
	}
	// The client port takes simple authentication, as an insecure
	// cluster's does, unless ClientSASL says otherwise.
	c.rmSrv, err = hadooprpc.NewServer(hadooprpc.ServerConfig{Name: "resourcemanager", Logger: c.log, SASL: c.cfg.ClientSASL}, c.clientProtocol())
	if err != nil {
		ln.Close()
		return err
	}
	c.rmAddr = ln.Addr().String()
	c.serve(c.rmSrv, ln, c.ctx)

	sln, err := c.listen(c.cfg.SchedulerPort)
	if err != nil {
		return err
	}
	// The scheduler port takes AMRMTokens only, even on an insecure
	// cluster.
	c.schedSrv, err = hadooprpc.NewServer(hadooprpc.ServerConfig{Name: "scheduler", Logger: c.log,
		SASL: hadooprpc.TokenServer{Lookup: c.amrmLookup, Protection: c.cfg.RPCProtection}}, c.masterProtocol())
	if err != nil {
		sln.Close()
		return err
	}
	c.schedAddr = sln.Addr().String()
	c.serve(c.schedSrv, sln, c.ctx)
	return nil
}

// Addr returns the ResourceManager's client address
// (yarn.resourcemanager.address).
func (c *Cluster) Addr() string { return c.rmAddr }

// SchedulerAddr returns the ResourceManager's scheduler address
// (yarn.resourcemanager.scheduler.address).
func (c *Cluster) SchedulerAddr() string { return c.schedAddr }

// NodeInfo describes one NodeManager.
type NodeInfo struct {
	// Index is the node's position, as the fault methods take it.
	Index int
	// Addr is its ContainerManagementProtocol address, its NodeId.
	Addr string
	// State is RUNNING, LOST or UNHEALTHY.
	State string
	// Dir holds its local and log directories.
	Dir string
}

// Nodes describes the NodeManagers.
func (c *Cluster) Nodes() []NodeInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make([]NodeInfo, len(c.nodes))
	for i, n := range c.nodes {
		out[i] = NodeInfo{Index: i, Addr: n.addr, State: n.state.String(), Dir: n.dir}
	}
	return out
}

// Progress returns the progress the application's ApplicationMaster last
// reported (0 to 1), and whether the application exists.
func (c *Cluster) Progress(appID string) (float32, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range c.apps {
		if client.AppIDFromProto(a.id).String() == appID {
			return a.progress, true
		}
	}
	return 0, false
}

// ContainerInfo describes one container.
type ContainerInfo struct {
	// ID is YARN's container id.
	ID string
	// App is its application's id.
	App string
	// Node is the index of its NodeManager.
	Node int
	// AM is true for an ApplicationMaster's container.
	AM bool
	// ExecutorID is the SPINDLE_EXECUTOR_ID of its launch context.
	ExecutorID string
	// PID is its process's id, zero before it starts.
	PID int
	// Running is true while its process runs.
	Running bool
	// ExitStatus and Diagnostics are set once it completed.
	ExitStatus  int32
	Diagnostics string
	// WorkDir and LogDir are its directories on its node.
	WorkDir, LogDir string
}

// Containers describes every container the cluster allocated, of every
// application, in allocation order.
func (c *Cluster) Containers() []ContainerInfo {
	c.mu.Lock()
	defer c.mu.Unlock()
	var all []*container
	for _, n := range c.nodes {
		for _, ct := range n.containers {
			all = append(all, ct)
		}
	}
	sort.Slice(all, func(i, j int) bool {
		return all[i].allocated.Before(all[j].allocated) || (all[i].allocated.Equal(all[j].allocated) && all[i].idStr < all[j].idStr)
	})
	out := make([]ContainerInfo, len(all))
	for i, ct := range all {
		out[i] = ct.infoLocked()
	}
	return out
}

// Close stops every container and server and waits for the cluster's
// goroutines.
func (c *Cluster) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	var running []*container
	for _, n := range c.nodes {
		for _, ct := range n.containers {
			if !ct.completed {
				running = append(running, ct)
			}
		}
	}
	c.mu.Unlock()
	for _, ct := range running {
		ct.signal(true)
	}
	if c.cancel != nil {
		c.cancel()
	}
	c.wg.Wait()
	return nil
}

func (c *Cluster) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}

// scheduleLoop places ApplicationMasters as room appears.
func (c *Cluster) scheduleLoop() {
	t := time.NewTicker(100 * time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-c.kick:
		case <-t.C:
		}
		c.mu.Lock()
		launch := c.placeAMsLocked()
		c.mu.Unlock()
		for _, ct := range launch {
			c.launchAM(ct)
		}
	}
}
