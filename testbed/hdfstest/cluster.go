package hdfstest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// Cluster is a running test HDFS: one namespace served by one or more
// namenode endpoints, and several datanodes, all in this process.
type Cluster struct {
	cfg   Config
	log   *slog.Logger
	nn    *namenode
	dns   []*dataNode
	stats *counters
	hold  *readHold

	nnAddrs []string
	active  atomic.Int32

	cancel context.CancelFunc
	wg     sync.WaitGroup
	mu     sync.Mutex // serialises KillDataNode, RestartDataNode and Close
	closed bool
}

// DataNodeInfo describes one datanode.
type DataNodeInfo struct {
	// Index is the datanode's position, as KillDataNode takes it.
	Index int
	// Addr is the data-transfer address.
	Addr string
	// Hostname is the name clients see in block locations.
	Hostname string
	// UUID is the datanode's id.
	UUID string
	// Dir holds its block files.
	Dir string
	// Alive is false after KillDataNode.
	Alive bool
}

// BlockInfo describes one block of a file.
type BlockInfo struct {
	// ID is the block id.
	ID uint64
	// Offset and Length place the block in its file.
	Offset, Length int64
	// DataNodes lists the datanodes holding a readable replica, in the
	// order the namenode gives readers.
	DataNodes []int
	// Pipeline lists the datanodes the block was written through, head
	// first.
	Pipeline []int
}

// Start starts a cluster as cfg describes; zero fields take DefaultConfig
// values. ctx bounds the start only; the cluster runs until Close.
func Start(ctx context.Context, cfg Config) (*Cluster, error) {
	cfg = cfg.withDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.With("component", "hdfstest")
	if err := os.MkdirAll(cfg.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("hdfstest: create %s: %w", cfg.Dir, err)
	}
	img, err := readImage(cfg.imagePath())
	if err != nil {
		return nil, err
	}
	cfg.poolID = newPoolID(cfg.Host)
	if img != nil {
		cfg.poolID = img.PoolID
	}
	c := &Cluster{cfg: cfg, log: log, stats: newCounters(), hold: &readHold{}}
	c.nn = newNamenode(cfg, log.With("role", "namenode"), cfg.poolID)
	if img != nil {
		if err := c.nn.loadImage(img); err != nil {
			return nil, fmt.Errorf("hdfstest: load %s: %w", cfg.imagePath(), err)
		}
	} else {
		c.nn.seed()
	}
	c.nn.invalidate = c.invalidate
	c.nn.stats = c.stats

	runCtx, cancel := context.WithCancel(context.Background())
	c.cancel = cancel
	if err := c.startDataNodes(); err != nil {
		c.Close()
		return nil, err
	}
	c.nn.recoverAfterRestart()
	if err := c.startNameNodes(runCtx); err != nil {
		c.Close()
		return nil, err
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.nn.saveLoop(runCtx, cfg.imagePath())
	}()
	if err := ctx.Err(); err != nil {
		c.Close()
		return nil, err
	}
	log.Info("test hdfs started", "namenodes", c.nnAddrs, "datanodes", cfg.DataNodes, "dir", cfg.Dir)
	return c, nil
}

// NewTestCluster starts a cluster for a test or benchmark, in a temporary
// directory when cfg.Dir is empty, and closes it when tb ends.
func NewTestCluster(tb testing.TB, cfg Config) *Cluster {
	tb.Helper()
	if cfg.Dir == "" {
		cfg.Dir = tb.TempDir()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := Start(ctx, cfg)
	if err != nil {
		tb.Fatalf("start test hdfs: %v", err)
	}
	tb.Cleanup(func() { c.Close() })
	return c
}

func (cfg Config) imagePath() string { return filepath.Join(cfg.Dir, "namenode", "fsimage.json") }

func newPoolID(host string) string {
	var b [4]byte
	rand.Read(b[:])
	return fmt.Sprintf("BP-%d-%s-%d", uint32(b[0])<<24|uint32(b[1])<<16|uint32(b[2])<<8|uint32(b[3]), host, time.Now().UnixMilli())
}

func (c *Cluster) startDataNodes() error {
	for i := 0; i < c.cfg.DataNodes; i++ {
		dir := filepath.Join(c.cfg.Dir, fmt.Sprintf("datanode%d", i))
		st, err := openStore(dir)
		if err != nil {
			return fmt.Errorf("hdfstest: datanode %d: %w", i, err)
		}
		uuid, err := datanodeUUID(dir)
		if err != nil {
			return fmt.Errorf("hdfstest: datanode %d: %w", i, err)
		}
		host := "localhost"
		if i < len(c.cfg.DataNodeHostnames) && c.cfg.DataNodeHostnames[i] != "" {
			host = c.cfg.DataNodeHostnames[i]
		}
		d := &dataNode{
			index: i, uuid: uuid, hostname: host, ip: c.cfg.Host, store: st, nn: c.nn,
			cfg: c.cfg, stats: c.stats, hold: c.hold, log: c.log.With("role", "datanode", "datanode", i), keys: c.nn.blockKeys,
		}
		c.dns = append(c.dns, d)
		if err := d.listen(); err != nil {
			return err
		}
		c.register(d)
	}
	return nil
}

// register tells the namenode about a (re)started datanode and its replicas.
func (c *Cluster) register(d *dataNode) {
	c.nn.registerDatanode(d.index, d.idProto(), "DS-"+d.uuid)
	for _, id := range c.nn.blockReport(d.index, d.store.list()) {
		d.store.remove(id)
	}
}

// datanodeUUID returns the id kept in dir, making one on first start.
func datanodeUUID(dir string) (string, error) {
	p := filepath.Join(dir, "uuid")
	if b, err := os.ReadFile(p); err == nil {
		return strings.TrimSpace(string(b)), nil
	}
	var b [16]byte
	rand.Read(b[:])
	h := hex.EncodeToString(b[:])
	id := h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
	return id, os.WriteFile(p, []byte(id+"\n"), 0o644)
}

func (c *Cluster) startNameNodes(ctx context.Context) error {
	sasl := c.cfg.SASL
	if c.nn.tokens != nil {
		// One hadoop.rpc.protection for every method, as in Hadoop.
		var protection string
		if ks, ok := c.cfg.SASL.(hadooprpc.KerberosServer); ok {
			protection = ks.Protection
		}
		sasl = hadooprpc.ServerMechanisms{c.cfg.SASL, hadooprpc.TokenServer{Lookup: c.nn.tokens.lookup, Protection: protection}}
	}
	for i := 0; i < c.cfg.NameNodes; i++ {
		port := 0
		if i < len(c.cfg.NameNodePorts) {
			port = c.cfg.NameNodePorts[i]
		}
		addr := net.JoinHostPort(c.cfg.Host, strconv.Itoa(port))
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("hdfstest: namenode %d: listen on %s: %w", i, addr, err)
		}
		srv, err := hadooprpc.NewServer(hadooprpc.ServerConfig{
			Name:   fmt.Sprintf("namenode%d", i),
			Logger: c.log,
			SASL:   sasl,
			OnCall: func(_, method string, _ error) { c.stats.call(method) },
		}, c.nn.clientProtocol(endpoint{index: i, active: c.isActive}))
		if err != nil {
			ln.Close()
			return err
		}
		c.nnAddrs = append(c.nnAddrs, ln.Addr().String())
		c.wg.Add(1)
		go func() {
			defer c.wg.Done()
			if err := srv.Serve(ctx, ln); err != nil {
				c.log.Error("namenode stopped", "err", err)
			}
		}()
	}
	return nil
}

func (c *Cluster) isActive(i int) bool { return int(c.active.Load()) == i }

// invalidate deletes replicas of removed blocks on a live datanode; a dead
// one drops them at its next block report.
func (c *Cluster) invalidate(dn int, ids []uint64) {
	if dn >= len(c.dns) {
		return
	}
	d := c.dns[dn]
	d.mu.Lock()
	alive := d.alive
	d.mu.Unlock()
	if !alive {
		return
	}
	for _, id := range ids {
		d.store.remove(id)
	}
}

// Addr returns the active namenode's address (host:port).
func (c *Cluster) Addr() string { return c.nnAddrs[c.active.Load()] }

// NameNodeAddrs returns every namenode endpoint's address.
func (c *Cluster) NameNodeAddrs() []string { return append([]string(nil), c.nnAddrs...) }

// URI returns the cluster's file system URI: hdfs://host:port, or
// hdfs://<Nameservice> for an HA cluster.
func (c *Cluster) URI() string {
	if len(c.nnAddrs) > 1 {
		return "hdfs://" + c.cfg.Nameservice
	}
	return "hdfs://" + c.Addr()
}

// Superuser returns the HDFS superuser's name.
func (c *Cluster) Superuser() string { return c.cfg.Superuser }

// Failover makes namenode endpoint i the active one.
func (c *Cluster) Failover(i int) error {
	if i < 0 || i >= len(c.nnAddrs) {
		return fmt.Errorf("hdfstest: no namenode %d (have %d)", i, len(c.nnAddrs))
	}
	c.active.Store(int32(i))
	return nil
}

// DataNodes describes the datanodes.
func (c *Cluster) DataNodes() []DataNodeInfo {
	out := make([]DataNodeInfo, len(c.dns))
	for i, d := range c.dns {
		d.mu.Lock()
		out[i] = DataNodeInfo{Index: i, Addr: d.addr(), Hostname: d.hostname, UUID: d.uuid, Dir: d.store.dir, Alive: d.alive}
		d.mu.Unlock()
	}
	return out
}

// KillDataNode stops datanode i as a crash would: its port closes, its
// connections drop mid-stream, and the namenode stops handing it out.
func (c *Cluster) KillDataNode(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.dns) {
		return fmt.Errorf("hdfstest: no datanode %d (have %d)", i, len(c.dns))
	}
	c.nn.datanodeDied(i)
	c.hold.end()
	c.dns[i].stop()
	c.log.Info("datanode killed", "datanode", i)
	return nil
}

// RestartDataNode brings a killed datanode back on its old port with the
// replicas it kept.
func (c *Cluster) RestartDataNode(i int) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if i < 0 || i >= len(c.dns) {
		return fmt.Errorf("hdfstest: no datanode %d (have %d)", i, len(c.dns))
	}
	d := c.dns[i]
	d.mu.Lock()
	alive := d.alive
	d.mu.Unlock()
	if alive {
		return fmt.Errorf("hdfstest: datanode %d is running", i)
	}
	if err := d.listen(); err != nil {
		return err
	}
	c.register(d)
	return nil
}

// Blocks describes the blocks of the file name.
func (c *Cluster) Blocks(name string) ([]BlockInfo, error) {
	nn := c.nn
	nn.mu.RLock()
	defer nn.mu.RUnlock()
	w, err := nn.resolve(nn.userFor(c.cfg.Superuser), path.Clean(name))
	if err != nil {
		return nil, err
	}
	f := w.target()
	if f == nil || f.isDir {
		return nil, fmt.Errorf("hdfstest: %s: %w", name, os.ErrNotExist)
	}
	var out []BlockInfo
	var off int64
	for _, b := range f.blocks {
		dns, _ := nn.readableReplicas(b)
		out = append(out, BlockInfo{ID: b.id, Offset: off, Length: b.numBytes, DataNodes: dns, Pipeline: append([]int(nil), b.targets...)})
		off += b.numBytes
	}
	return out, nil
}

// CorruptBlock flips a byte in the middle of block blockIndex of the file
// name on the given datanodes (every replica when none are given), leaving
// the stored checksums alone, as bit rot would.
func (c *Cluster) CorruptBlock(name string, blockIndex int, datanodes ...int) error {
	blocks, err := c.Blocks(name)
	if err != nil {
		return err
	}
	if blockIndex < 0 || blockIndex >= len(blocks) {
		return fmt.Errorf("hdfstest: %s has %d blocks, no block %d", name, len(blocks), blockIndex)
	}
	b := blocks[blockIndex]
	if len(datanodes) == 0 {
		datanodes = b.DataNodes
	}
	for _, dn := range datanodes {
		if dn < 0 || dn >= len(c.dns) {
			return fmt.Errorf("hdfstest: no datanode %d", dn)
		}
		if err := c.dns[dn].store.corrupt(b.ID, b.Length/2); err != nil {
			return fmt.Errorf("hdfstest: corrupt block %d of %s on datanode %d: %w", blockIndex, name, dn, err)
		}
	}
	return nil
}

// Stats returns the operation counts since the start or the last ResetStats.
func (c *Cluster) Stats() Stats { return c.stats.snapshot() }

// ResetStats zeroes the operation counts.
func (c *Cluster) ResetStats() { c.stats.reset() }

// Close stops every server, saves the namespace and waits for the
// cluster's goroutines.
func (c *Cluster) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	if c.cancel != nil {
		c.cancel()
	}
	c.hold.end()
	for _, d := range c.dns {
		d.stop()
	}
	c.wg.Wait()
	if c.nn == nil {
		return nil
	}
	return c.nn.saveImage(c.cfg.imagePath())
}
