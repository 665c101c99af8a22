package am

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sync/errgroup"
	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/yarn/client"
)

// ProtocolName is ApplicationMasterProtocol's name on the wire.
const ProtocolName = "org.apache.hadoop.yarn.api.ApplicationMasterProtocolPB"

// AMRMTokenKind is the kind of the token the ResourceManager gives the AM.
const AMRMTokenKind = "YARN_AM_RM_TOKEN"

// GPUResource is YARN's name for GPUs.
const GPUResource = "yarn.io/gpu"

// Errors of the allocator.
var (
	// ErrGangTimeout: YARN did not grant the whole gang in time; nothing
	// is held.
	ErrGangTimeout = errors.New("yarn am: gang incomplete")
	// ErrShutdown: the ResourceManager told the AM to stop (its attempt
	// is over).
	ErrShutdown = errors.New("yarn am: ResourceManager ended this attempt")
	// ErrLaunch: a NodeManager refused to start a container.
	ErrLaunch = errors.New("yarn am: container launch failed")
)

// Config configures an Allocator.
type Config struct {
	// SchedulerAddrs are the ResourceManagers' scheduler addresses.
	SchedulerAddrs []string
	// AMRMToken authenticates the AM (from the container's credentials).
	AMRMToken hadooprpc.Token
	// RPCProtection is hadoop.rpc.protection for the AM's token
	// connections (AMRMToken, NMTokens); empty means authentication.
	RPCProtection string
	// Host and Port are where the AM serves its driver-facing API;
	// TrackingURL is shown by YARN.
	Host        string
	Port        int
	TrackingURL string
	// LaunchContext builds the container launch context of an executor.
	LaunchContext func(spec driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error)
	// MemoryOverheadMB is added to each executor's memory in its ask.
	MemoryOverheadMB int
	// GangTimeout bounds the wait for a whole gang (zero:
	// DefaultGangTimeout).
	GangTimeout time.Duration
	// Racks maps the cluster's NodeManager hosts to their racks; executors
	// are asked for on the hosts among them that hold their input
	// (ExecutorSpec.PreferredHosts). Empty asks for any node.
	Racks map[string]string
	// LocalityWait is how long a gang's requests stay on their preferred
	// nodes, and then as long again on those nodes' racks, before they
	// take any node; zero asks for any node at once (YARN's own delay
	// scheduling still prefers the named nodes).
	LocalityWait time.Duration
	// HeartbeatInterval is the allocate period once nothing is pending
	// (zero: DefaultHeartbeatInterval). While a gang is pending it is
	// 100ms.
	HeartbeatInterval time.Duration
	// RMCallTimeout bounds one call to the ResourceManager's scheduler
	// (an allocate, the release of a gang that failed to start; zero:
	// DefaultRMCallTimeout); NMCallTimeout one call to a NodeManager
	// (starting or stopping containers; zero: DefaultNMCallTimeout).
	RMCallTimeout, NMCallTimeout time.Duration
	// LookupTimeout bounds resolving a host name to match a container's
	// node to the cluster's hosts (zero: DefaultLookupTimeout).
	LookupTimeout time.Duration
	Logger        *slog.Logger
}

// Defaults of Config's durations, given to zero fields by Start.
const (
	DefaultGangTimeout       = 2 * time.Minute
	DefaultHeartbeatInterval = time.Second
	DefaultRMCallTimeout     = 30 * time.Second
	DefaultNMCallTimeout     = 30 * time.Second
	DefaultLookupTimeout     = 2 * time.Second
)

// withDefaults returns c with zero durations replaced by their defaults.
func (c Config) withDefaults() Config {
	c.GangTimeout = cmp.Or(max(c.GangTimeout, 0), DefaultGangTimeout)
	c.HeartbeatInterval = cmp.Or(max(c.HeartbeatInterval, 0), DefaultHeartbeatInterval)
	c.RMCallTimeout = cmp.Or(max(c.RMCallTimeout, 0), DefaultRMCallTimeout)
	c.NMCallTimeout = cmp.Or(max(c.NMCallTimeout, 0), DefaultNMCallTimeout)
	c.LookupTimeout = cmp.Or(max(c.LookupTimeout, 0), DefaultLookupTimeout)
	return c
}

// container is an executor's container.
type container struct {
	spec    driver.ExecutorSpec
	c       *pb.ContainerProto
	host    string
	started bool
	// released: the driver gave the container back, so its end (YARN
	// reports -100, aborted) is no loss.
	released bool
	done     chan struct{}
}

// gang is a Request being filled.
type gang struct {
	specs   []driver.ExecutorSpec
	hosts   [][]string          // NodeManager hosts holding each spec's input
	waiting map[int32]*waitList // priority -> the specs without a container
	held    map[int]*pb.ContainerProto
	heldBy  map[string]int // container id -> the spec index held for it
	capab   map[int32]*pb.ResourceProto
	asked   map[int32]map[string]bool // resource names asked at each priority
	level   localityLevel
	ready   chan struct{}
}

// Allocator is a driver.ClusterManager over YARN, run inside the AM
// container.
type Allocator struct {
	cfg Config
	log *slog.Logger

	rpcMu sync.Mutex
	rm    *hadooprpc.FailoverClient

	mu         sync.Mutex
	responseID int32
	asks       []*pb.ResourceRequestProto
	releases   []*pb.ContainerIdProto
	// excluded are the hosts the job keeps off (ExecutorSpec.ExcludedHosts),
	// and exclude those of them the ResourceManager has not been told yet
	// (the next allocate call's blacklist additions).
	excluded     map[string]bool
	exclude      []string
	nmTokens     map[string]hadooprpc.Token
	byID         map[string]*container // container id -> executor container
	byExec       map[string]*container
	gang         *gang
	nextPrio     int32
	progress     float32
	fatal        error
	kick         chan struct{}
	maxCap       *pb.ResourceProto
	allocCalls   int
	tracking     string // the tracking URL, sentTracking the one YARN has
	sentTracking string
	hosts        *hostIndex
	// headroom is the resources the ResourceManager's last allocate
	// answer said the application may still get (its limit); nil before
	// one said.
	headroom *pb.ResourceProto

	events    *eventQueue
	stop      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// What the ApplicationMaster's allocator offers a cluster-mode driver;
// the yarn package adds the token keeper's credentials to it.
var (
	_ driver.ClusterManager    = (*Allocator)(nil)
	_ driver.RoomReporter      = (*Allocator)(nil)
	_ driver.TrackingURLSetter = (*Allocator)(nil)
	_ driver.ProgressReporter  = (*Allocator)(nil)
)

// Start registers the AM with the ResourceManager and starts the allocate
// heartbeat.
func Start(ctx context.Context, cfg Config) (*Allocator, error) {
	cfg = cfg.withDefaults()
	if cfg.LaunchContext == nil {
		return nil, errors.New("yarn am: no launch context builder")
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	a := &Allocator{
		cfg: cfg, log: log.With("component", "yarn-am"),
		nmTokens: map[string]hadooprpc.Token{}, byID: map[string]*container{}, byExec: map[string]*container{},
		nextPrio: 1, kick: make(chan struct{}, 1), events: newEventQueue(), stop: make(chan struct{}),
		tracking: cfg.TrackingURL, sentTracking: cfg.TrackingURL,
	}
	nmHosts := make([]string, 0, len(cfg.Racks))
	for h := range cfg.Racks {
		nmHosts = append(nmHosts, h)
	}
	a.hosts = newHostIndex(nmHosts, nil)
	a.hosts.timeout = cfg.LookupTimeout
	if err := a.dialRM(cfg.AMRMToken); err != nil {
		return nil, err
	}
	req := &pb.RegisterApplicationMasterRequestProto{
		Host: proto.String(cfg.Host), RpcPort: proto.Int32(int32(cfg.Port)), TrackingUrl: proto.String(cfg.TrackingURL),
	}
	resp := &pb.RegisterApplicationMasterResponseProto{}
	if err := a.call(ctx, "registerApplicationMaster", req, resp); err != nil {
		a.rm.Close()
		return nil, fmt.Errorf("register the ApplicationMaster with %v: %w", cfg.SchedulerAddrs, err)
	}
	a.maxCap = resp.GetMaximumCapability()
	for _, t := range resp.GetNmTokensFromPreviousAttempts() {
		a.nmTokens[nodeAddr(t.GetNodeId())] = hadooprpc.TokenFromProto(t.GetToken())
	}
	a.log.Info("registered with the resourcemanager", "queue", resp.GetQueue(), "max_memory_mb", a.maxCap.GetMemory(), "max_vcores", a.maxCap.GetVirtualCores())
	a.wg.Add(2)
	go func() {
		defer a.wg.Done()
		a.heartbeat()
	}()
	go func() {
		defer a.wg.Done()
		a.events.pump(a.stop)
	}()
	return a, nil
}

func (a *Allocator) dialRM(tok hadooprpc.Token) error {
	f, err := hadooprpc.NewFailoverClient(hadooprpc.FailoverConfig{
		Addrs:  a.cfg.SchedulerAddrs,
		Client: hadooprpc.ClientConfig{Protocol: ProtocolName, SASL: hadooprpc.TokenAuth{Token: tok, Protection: a.cfg.RPCProtection}},
	})
	if err != nil {
		return fmt.Errorf("yarn am: %w", err)
	}
	a.rpcMu.Lock()
	old := a.rm
	a.rm = f
	a.rpcMu.Unlock()
	if old != nil {
		old.Close()
	}
	return nil
}

func (a *Allocator) call(ctx context.Context, method string, req, resp proto.Message) error {
	a.rpcMu.Lock()
	rm := a.rm
	a.rpcMu.Unlock()
	return rm.Call(ctx, method, req, resp)
}

func nodeAddr(n *pb.NodeIdProto) string {
	return net.JoinHostPort(n.GetHost(), strconv.Itoa(int(n.GetPort())))
}

// Events delivers executor events until Close.
func (a *Allocator) Events() <-chan driver.Event { return a.events.out }

// AllocateCalls returns how many allocate round trips the AM made.
func (a *Allocator) AllocateCalls() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.allocCalls
}

// SetTrackingURL makes url (the driver's web UI, in cluster mode) the
// application's tracking URL from the next heartbeat on.
func (a *Allocator) SetTrackingURL(url string) {
	a.mu.Lock()
	a.tracking = url
	a.mu.Unlock()
	a.wake()
}

// SetProgress sets the progress reported on the next heartbeat (0 to 1).
func (a *Allocator) SetProgress(p float32) {
	a.mu.Lock()
	a.progress = min(max(p, 0), 1)
	a.mu.Unlock()
}

// ReportProgress is SetProgress for the driver in the ApplicationMaster
// (cluster mode).
func (a *Allocator) ReportProgress(_ context.Context, done float64) error {
	a.SetProgress(float32(done))
	return nil
}

func (a *Allocator) wake() {
	select {
	case a.kick <- struct{}{}:
	default:
	}
}

// Request acquires a container for every spec, all or nothing, then starts
// them all. When YARN has not granted the whole gang within the gang
// timeout, every container held is released and the error says what was
// missing.
func (a *Allocator) Request(ctx context.Context, specs []driver.ExecutorSpec) error {
	if len(specs) == 0 {
		return nil
	}
	g := &gang{specs: specs, hosts: make([][]string, len(specs)), waiting: map[int32]*waitList{}, held: map[int]*pb.ContainerProto{},
		heldBy: map[string]int{},
		capab:  map[int32]*pb.ResourceProto{}, asked: map[int32]map[string]bool{}, ready: make(chan struct{})}
	if a.cfg.LocalityWait <= 0 {
		g.level = levelAny
	}
	local := 0
	for i, s := range specs {
		g.hosts[i] = a.hosts.match(s.PreferredHosts)
		if len(g.hosts[i]) > 0 {
			local++
		}
	}
	a.mu.Lock()
	if a.fatal != nil {
		err := a.fatal
		a.mu.Unlock()
		return err
	}
	if a.gang != nil {
		a.mu.Unlock()
		return errors.New("yarn am: another gang is being acquired")
	}
	a.excludeLocked(specs)
	a.prioritiseLocked(g)
	for p := range g.capab {
		a.askLocked(g, p)
	}
	a.gang = g
	a.mu.Unlock()
	a.wake()
	a.log.Info("asking for a gang of containers", "executors", len(specs), "with_locality", local, "locality", g.level, "timeout", a.cfg.GangTimeout)

	timer := time.NewTimer(a.cfg.GangTimeout)
	defer timer.Stop()
	var relax <-chan time.Time
	if g.level < levelAny {
		t := time.NewTicker(a.cfg.LocalityWait)
		defer t.Stop()
		relax = t.C
	}
wait:
	for {
		select {
		case <-g.ready:
			break wait
		case <-relax:
			if a.relax(g) == levelAny {
				relax = nil
			}
		case <-timer.C:
			return a.abandon(g, fmt.Errorf("%w: YARN granted %d of %d containers within %v (%s); every container held was released",
				ErrGangTimeout, a.granted(g), len(specs), a.cfg.GangTimeout, a.shapes(g)))
		case <-ctx.Done():
			return a.abandon(g, fmt.Errorf("acquire a gang of %d containers: %w", len(specs), ctx.Err()))
		case <-a.stop:
			return a.abandon(g, driver.ErrInterrupted)
		}
	}
	a.mu.Lock()
	if a.fatal != nil {
		err := a.fatal
		a.mu.Unlock()
		return a.abandon(g, err)
	}
	a.gang = nil
	held := make([]*container, 0, len(specs))
	nodeLocal := 0
	for i, c := range g.held {
		ec := &container{spec: specs[i], c: c, host: c.GetNodeId().GetHost(), done: make(chan struct{})}
		if slices.Contains(g.hosts[i], ec.host) {
			nodeLocal++
		}
		a.byID[client.ContainerString(c.GetId())] = ec
		a.byExec[specs[i].ID] = ec
		held = append(held, ec)
	}
	a.mu.Unlock()
	a.log.Info("gang granted", "executors", len(specs), "on_input_nodes", nodeLocal, "with_locality", local, "locality", g.level)
	return a.startAll(ctx, held)
}

// prioritiseLocked gives each of g's executors the priority it is asked
// for under, and each priority its container's resources. Called with
// a.mu held.
func (a *Allocator) prioritiseLocked(g *gang) {
	// One priority per container shape, and apart for executors with
	// and without preferred nodes: YARN's locality is per priority, and
	// an executor that can run anywhere must not wait for the others'
	// nodes.
	type shape struct {
		mem, cores, gpus int
		local            bool
	}
	prios := map[shape]int32{}
	for i, s := range g.specs {
		sh := shape{ContainerMB(s, a.cfg.MemoryOverheadMB), max(s.Cores, 1), s.GPUs, len(g.hosts[i]) > 0}
		p, ok := prios[sh]
		if !ok {
			p = a.nextPrio
			a.nextPrio++
			prios[sh] = p
			capab := &pb.ResourceProto{Memory: proto.Int64(int64(sh.mem)), VirtualCores: proto.Int32(int32(sh.cores))}
			if sh.gpus > 0 {
				capab.ResourceValueMap = []*pb.ResourceInformationProto{{Key: proto.String(GPUResource), Value: proto.Int64(int64(sh.gpus))}}
			}
			g.capab[p] = capab
			g.asked[p] = map[string]bool{}
		}
		a.waitLocked(g, p, i)
	}
}

// waitLocked makes g's executor i wait for a container at priority p,
// behind those already waiting. Called with a.mu held.
func (a *Allocator) waitLocked(g *gang, p int32, i int) {
	w := g.waiting[p]
	if w == nil {
		w = &waitList{}
		g.waiting[p] = w
	}
	var keys []string
	for _, h := range g.hosts[i] {
		keys = append(keys, hostKey(h))
		if r := a.cfg.Racks[h]; r != "" {
			keys = append(keys, rackKey(r))
		}
	}
	w.push(i, keys)
}

// excludeLocked adds the hosts the specs keep off to the application's
// blacklist: the ResourceManager grants no container there. Called with
// a.mu held.
func (a *Allocator) excludeLocked(specs []driver.ExecutorSpec) {
	var added []string
	for _, s := range specs {
		for _, h := range s.ExcludedHosts {
			if h != "" && !a.excluded[h] {
				if a.excluded == nil {
					a.excluded = map[string]bool{}
				}
				a.excluded[h] = true
				added = append(added, h)
			}
		}
	}
	if len(added) > 0 {
		a.exclude = append(a.exclude, added...)
		a.log.Info("asking YARN for no containers on hosts where the job failed", "hosts", strings.Join(added, ","))
	}
}

// askLocked queues the requests of one priority of a gang for its
// waiting executors at the gang's locality level. Called with a.mu held.
func (a *Allocator) askLocked(g *gang, p int32) {
	waiting := g.waiting[p].specs()
	hosts := make([][]string, len(waiting))
	for j, i := range waiting {
		hosts[j] = g.hosts[i]
	}
	a.asks = append(a.asks, buildAsks(p, g.capab[p], hosts, a.cfg.Racks, g.level, g.asked[p])...)
}

// relax moves a pending gang's requests one locality level out (nodes,
// then racks, then anywhere) and returns the new level.
func (a *Allocator) relax(g *gang) localityLevel {
	a.mu.Lock()
	if g.level < levelAny {
		g.level++
		for p := range g.capab {
			if g.waiting[p].len() > 0 {
				a.askLocked(g, p)
			}
		}
	}
	level := g.level
	a.mu.Unlock()
	a.wake()
	a.log.Info("relaxing locality", "level", level, "granted", a.granted(g), "executors", len(g.specs))
	return level
}

// granted counts the containers a gang holds.
func (a *Allocator) granted(g *gang) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(g.held)
}

// shapes describes a gang's container sizes for messages.
func (a *Allocator) shapes(g *gang) string {
	a.mu.Lock()
	defer a.mu.Unlock()
	var out []string
	prios := make([]int32, 0, len(g.capab))
	for p := range g.capab {
		prios = append(prios, p)
	}
	sort.Slice(prios, func(i, j int) bool { return prios[i] < prios[j] })
	for _, p := range prios {
		capab := g.capab[p]
		n := g.waiting[p].len()
		if n == 0 {
			continue
		}
		s := fmt.Sprintf("%d more of %d MiB, %d vcores", n, capab.GetMemory(), capab.GetVirtualCores())
		if len(capab.GetResourceValueMap()) > 0 {
			s += fmt.Sprintf(", %d GPUs", capab.GetResourceValueMap()[0].GetValue())
		}
		out = append(out, s)
	}
	return "missing " + strings.Join(out, "; ")
}

// abandon cancels a gang's asks and releases what it holds.
func (a *Allocator) abandon(g *gang, err error) error {
	a.mu.Lock()
	for p := range g.capab {
		g.waiting[p] = nil
		a.askLocked(g, p) // every name asked before, now for 0
	}
	for _, c := range g.held {
		a.releases = append(a.releases, c.GetId())
	}
	g.held, g.heldBy = map[int]*pb.ContainerProto{}, map[string]int{}
	if a.gang == g {
		a.gang = nil
	}
	a.mu.Unlock()
	a.wake()
	a.log.Warn("gang abandoned", "err", err)
	return err
}

// Release stops the named executors (all when ids is empty) and waits until
// YARN reports their containers complete.
func (a *Allocator) Release(ctx context.Context, ids []string) error {
	a.mu.Lock()
	if len(ids) == 0 {
		for id := range a.byExec {
			ids = append(ids, id)
		}
	}
	var cs []*container
	for _, id := range ids {
		if c, ok := a.byExec[id]; ok {
			cs = append(cs, c)
			c.released = true
			a.releases = append(a.releases, c.c.GetId())
		}
	}
	a.mu.Unlock()
	var g errgroup.Group
	for _, c := range cs {
		g.Go(func() error {
			a.stopContainer(ctx, c)
			return nil
		})
	}
	g.Wait()
	a.wake()
	for _, c := range cs {
		select {
		case <-c.done:
		case <-ctx.Done():
			return fmt.Errorf("release executor %s: %w", c.spec.ID, ctx.Err())
		case <-a.stop:
			return nil
		}
	}
	return nil
}

func (a *Allocator) stopContainer(ctx context.Context, c *container) {
	node := nodeAddr(c.c.GetNodeId())
	a.mu.Lock()
	tok, ok := a.nmTokens[node]
	started := c.started
	a.mu.Unlock()
	if !ok || !started {
		return
	}
	req := &pb.StopContainersRequestProto{ContainerId: []*pb.ContainerIdProto{c.c.GetId()}}
	if err := nmCall(ctx, node, tok, a.cfg.RPCProtection, a.cfg.NMCallTimeout, "stopContainers", req, &pb.StopContainersResponseProto{}); err != nil {
		a.log.Warn("stop container", "executor", c.spec.ID, "node", node, "err", err)
	}
}

// emit queues an event for the driver; it never waits for the driver,
// which may be in a call to the allocator (Request) itself.
func (a *Allocator) emit(ev driver.Event) {
	a.events.push(ev)
}

// Finish unregisters the AM with a final status and diagnostics; YARN then
// ends every container of the application.
func (a *Allocator) Finish(ctx context.Context, status pb.FinalApplicationStatusProto, diagnostics string) error {
	a.shutdown()
	a.mu.Lock()
	tracking := a.tracking
	a.mu.Unlock()
	req := &pb.FinishApplicationMasterRequestProto{
		FinalApplicationStatus: status.Enum(), Diagnostics: proto.String(diagnostics), TrackingUrl: proto.String(tracking),
	}
	for attempt := 0; ; attempt++ {
		resp := &pb.FinishApplicationMasterResponseProto{}
		err := a.call(ctx, "finishApplicationMaster", req, resp)
		if err == nil && resp.GetIsUnregistered() {
			a.log.Info("unregistered", "status", status)
			return nil
		}
		if attempt == 20 {
			return fmt.Errorf("finish the ApplicationMaster: %v (unregistered %v)", err, resp.GetIsUnregistered())
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("finish the ApplicationMaster: %w", ctx.Err())
		case <-time.After(200 * time.Millisecond):
		}
	}
}

func (a *Allocator) shutdown() {
	a.closeOnce.Do(func() {
		close(a.stop)
		a.wg.Wait()
	})
}

// Close stops the heartbeat and closes the connection; call Finish first
// to unregister.
func (a *Allocator) Close() error {
	a.shutdown()
	a.rpcMu.Lock()
	defer a.rpcMu.Unlock()
	return a.rm.Close()
}

// Err returns the error that ended the allocator (the ResourceManager ended
// the attempt or stopped answering), or nil.
func (a *Allocator) Err() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.fatal
}

// Room says how many more executors of spec the application may get now,
// by the headroom the ResourceManager's last allocate answer gave it (its
// queue's room, as YARN counts it): an elastic job that runs smaller than
// it may asks it whether to grow. Zero before YARN said.
func (a *Allocator) Room(ctx context.Context, spec driver.ExecutorSpec) (int, error) {
	a.mu.Lock()
	h := a.headroom
	a.mu.Unlock()
	return headroomFits(h, ContainerMB(spec, a.cfg.MemoryOverheadMB), max(spec.Cores, 1)), nil
}

// ContainerMB is the memory of an executor's container: the executor's
// memory, what it shares with its training process (each counts that in
// its resident size, and YARN sums them), and spindle.yarn.executor.memoryOverhead.
func ContainerMB(spec driver.ExecutorSpec, overheadMB int) int {
	return spec.MemoryMB + spec.SharedMemoryMB + overheadMB
}

// SharedPhrase names an executor's shared memory in messages about its
// container's memory: empty for none.
func SharedPhrase(sharedMB int) string {
	if sharedMB == 0 {
		return ""
	}
	return fmt.Sprintf(" and %d MiB of feed memory shared with the training process (spindle.feed.sharedMemory)", sharedMB)
}

// headroomFits counts the containers of memMB and cores that fit in h.
func headroomFits(h *pb.ResourceProto, memMB, cores int) int {
	if h == nil || memMB < 1 {
		return 0
	}
	n := h.GetMemory() / int64(memMB)
	if h.VirtualCores != nil {
		n = min(n, int64(h.GetVirtualCores())/int64(cores))
	}
	return int(max(0, n))
}
