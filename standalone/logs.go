package standalone

import (
	"bytes"
	"context"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// tailInterval is how often executor output is fetched from workers.
const tailInterval = 200 * time.Millisecond

// tailer copies one executor's stdout and stderr files from its worker to
// the driver's console, line by line, until the executor has ended and
// everything it wrote was copied.
type tailer struct {
	c        *ClusterManager
	app, id  string
	workerID string
	addr     string
	ended    chan struct{} // closed when the executor reached a final state
	endOnce  sync.Once
	done     chan struct{} // closed when the tailer is finished
	offsets  [2]int64
	partial  [2][]byte
}

var streams = [2]string{"stdout", "stderr"}

// startTail begins copying an executor's output, once per executor.
func (c *ClusterManager) startTail(e *pb.ExecutorInfo, workers []*pb.WorkerInfo) {
	if e.GetState() == pb.ExecutorState_EXECUTOR_STATE_PLACED {
		return
	}
	if c.cfg.Console == nil {
		return
	}
	addr := e.GetWorkerAddr()
	for _, w := range workers {
		if w.GetId() == e.GetWorkerId() {
			addr = w.GetAddr()
		}
	}
	if addr == "" {
		return
	}
	c.tailMu.Lock()
	defer c.tailMu.Unlock()
	if _, ok := c.tails[e.GetId()]; ok || c.closing {
		return
	}
	t := &tailer{c: c, app: e.GetAppId(), id: e.GetId(), workerID: e.GetWorkerId(), addr: addr,
		ended: make(chan struct{}), done: make(chan struct{})}
	c.tails[e.GetId()] = t
	c.tailWG.Add(1)
	go func() {
		defer c.tailWG.Done()
		defer close(t.done)
		t.run()
	}()
}

// endTail tells an executor's tailer that no more output will come.
func (c *ClusterManager) endTail(id string) {
	c.tailMu.Lock()
	t := c.tails[id]
	c.tailMu.Unlock()
	if t != nil {
		t.endOnce.Do(func() { close(t.ended) })
	}
}

// waitTails waits, within ctx, until the tailers of ids (all when empty)
// copied everything.
func (c *ClusterManager) waitTails(ctx context.Context, ids []string) {
	c.tailMu.Lock()
	var ts []*tailer
	for id, t := range c.tails {
		if len(ids) == 0 || contains(ids, id) {
			ts = append(ts, t)
		}
	}
	c.tailMu.Unlock()
	for _, t := range ts {
		select {
		case <-t.done:
		case <-ctx.Done():
			return
		}
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func (t *tailer) run() {
	conn, err := t.c.workerConn(t.addr)
	if err != nil {
		t.c.logger.Warn("cannot follow executor output", "executor", t.id, "worker", t.workerID, "err", err)
		return
	}
	wc := pb.NewWorkerClient(conn)
	tick := time.NewTicker(tailInterval)
	defer tick.Stop()
	for {
		final := false
		select {
		case <-t.ended:
			final = true
		case <-t.c.ctx.Done():
			final = true
		default:
		}
		t.pull(wc)
		if final {
			t.flush()
			return
		}
		select {
		case <-tick.C:
		case <-t.ended:
		case <-t.c.ctx.Done():
		}
	}
}

// pull copies what was added to both streams since the last pull.
func (t *tailer) pull(wc pb.WorkerClient) {
	for i, s := range streams {
		for {
			ctx, cancel := context.WithTimeout(context.Background(), t.c.cfg.Timeouts.LogRead)
			resp, err := wc.ReadLog(ctx, &pb.ReadLogRequest{AppId: t.app, ExecutorId: t.id, Stream: s, Offset: t.offsets[i]})
			cancel()
			if err != nil || len(resp.GetData()) == 0 {
				break
			}
			t.offsets[i] = resp.GetNextOffset()
			t.emit(i, resp.GetData())
			if resp.GetNextOffset() >= resp.GetSize() {
				break
			}
		}
	}
}

// emit prints the complete lines of data, keeping a partial last line.
func (t *tailer) emit(stream int, data []byte) {
	buf := append(t.partial[stream], data...)
	for {
		i := bytes.IndexByte(buf, '\n')
		if i < 0 {
			break
		}
		t.print(stream, string(buf[:i]))
		buf = buf[i+1:]
	}
	t.partial[stream] = append([]byte(nil), buf...)
}

func (t *tailer) flush() {
	for i, p := range t.partial {
		if len(p) > 0 {
			t.print(i, string(p))
			t.partial[i] = nil
		}
	}
}

func (t *tailer) print(stream int, line string) {
	t.c.cfg.Console.Output(stream == 1, line)
}

// workerConn returns a cached connection to a worker, signed with the
// cluster secret.
func (c *ClusterManager) workerConn(addr string) (*grpc.ClientConn, error) {
	c.tailMu.Lock()
	defer c.tailMu.Unlock()
	if conn, ok := c.workerConns[addr]; ok {
		return conn, nil
	}
	conn, err := rpc.NewClient(addr, rpc.ClientConfig{Options: c.client.Credentials().DialOptionsTo(secure.WorkerAudience(addr))})
	if err != nil {
		return nil, err
	}
	c.workerConns[addr] = conn
	return conn, nil
}

// DeliversOutput says that executors' output reaches the driver's console
// by tailing their log files on the workers, so executors need not
// forward it.
func (c *ClusterManager) DeliversOutput() bool { return true }
