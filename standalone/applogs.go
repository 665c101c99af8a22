package standalone

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"

	"google.golang.org/grpc"

	"github.com/spindle-ml/spindle/standalone/client"
	"github.com/spindle-ml/spindle/standalone/internal/secure"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"

	"github.com/spindle-ml/spindle/internal/rpc"
)

// ErrNoSuchApp says the masters know no application by the id or name
// asked for (it never ran, or it ended so long ago that they forgot it).
var ErrNoSuchApp = errors.New("standalone: no such application")

// LogChunk is output an executor wrote since the previous read: whole
// lines, as its worker keeps them (each training line prefixed with its
// rank or role, as the submit terminal shows it).
type LogChunk struct {
	Executor *pb.ExecutorInfo
	Stream   string // stdout or stderr
	Lines    []string
}

// AppLogReader reads an application's executor logs from the workers
// that ran them, which keep them after the application ended (for
// spindle.worker.cleanupDelay), with calls signed with the cluster secret
// as the driver's own. It reads on from where the last Next stopped.
type AppLogReader struct {
	cl      *client.Client
	app     string
	conns   map[string]*grpc.ClientConn
	offsets map[string]int64
	partial map[string][]byte
}

// NewAppLogReader finds the application named by idOrName (its id, or a
// name only one application has) and returns a reader of its logs.
func NewAppLogReader(ctx context.Context, cl *client.Client, idOrName string) (*AppLogReader, error) {
	st, err := clusterStatus(ctx, cl)
	if err != nil {
		return nil, err
	}
	var named []string
	for _, a := range st.GetApps() {
		if a.GetId() == idOrName {
			return newAppLogReader(cl, a.GetId()), nil
		}
		if a.GetName() == idOrName {
			named = append(named, a.GetId())
		}
	}
	switch len(named) {
	case 0:
		return nil, fmt.Errorf("%w %q on masters %s: spindle status lists the applications they know", ErrNoSuchApp, idOrName, strings.Join(cl.Masters(), ","))
	case 1:
		return newAppLogReader(cl, named[0]), nil
	}
	return nil, fmt.Errorf("%w: %d applications are named %q (%s): name one by its id", ErrNoSuchApp, len(named), idOrName, strings.Join(named, ", "))
}

func newAppLogReader(cl *client.Client, app string) *AppLogReader {
	return &AppLogReader{cl: cl, app: app, conns: map[string]*grpc.ClientConn{}, offsets: map[string]int64{}, partial: map[string][]byte{}}
}

// App is the id of the application read.
func (r *AppLogReader) App() string { return r.app }

// Next returns the lines the application's executors wrote since the
// last call, in the order the masters list the executors, and whether
// the application has ended (then the lines are all there are, a last
// line without a newline included).
func (r *AppLogReader) Next(ctx context.Context) ([]LogChunk, bool, error) {
	st, err := clusterStatus(ctx, r.cl)
	if err != nil {
		return nil, false, err
	}
	var app *pb.AppInfo
	for _, a := range st.GetApps() {
		if a.GetId() == r.app {
			app = a
		}
	}
	if app == nil {
		return nil, false, fmt.Errorf("%w %s: the masters no longer know it", ErrNoSuchApp, r.app)
	}
	ended := app.GetState() != pb.AppState_APP_STATE_RUNNING
	workers := map[string]string{}
	for _, w := range st.GetWorkers() {
		workers[w.GetId()] = w.GetAddr()
	}
	var execs []*pb.ExecutorInfo
	for _, e := range st.GetExecutors() {
		if e.GetAppId() == r.app && e.GetState() != pb.ExecutorState_EXECUTOR_STATE_PLACED {
			execs = append(execs, e)
		}
	}
	sort.SliceStable(execs, func(i, j int) bool { return execs[i].GetUpdatedUnixMs() < execs[j].GetUpdatedUnixMs() })
	var out []LogChunk
	for _, e := range execs {
		addr := workers[e.GetWorkerId()]
		if addr == "" {
			addr = e.GetWorkerAddr()
		}
		for _, stream := range streams {
			lines, err := r.read(ctx, addr, e, stream, ended)
			if err != nil {
				return out, ended, err
			}
			if len(lines) > 0 {
				out = append(out, LogChunk{Executor: e, Stream: stream, Lines: lines})
			}
		}
	}
	return out, ended, nil
}

// read reads one stream of e on from where the last read stopped.
func (r *AppLogReader) read(ctx context.Context, addr string, e *pb.ExecutorInfo, stream string, last bool) ([]string, error) {
	if addr == "" {
		return nil, fmt.Errorf("executor %s of %s: the masters know no address of its worker %s", e.GetId(), r.app, e.GetWorkerId())
	}
	conn, err := r.conn(addr)
	if err != nil {
		return nil, err
	}
	wc := pb.NewWorkerClient(conn)
	key := e.GetId() + "/" + stream
	var lines []string
	for {
		resp, err := wc.ReadLog(ctx, &pb.ReadLogRequest{AppId: r.app, ExecutorId: e.GetId(), Stream: stream, Offset: r.offsets[key]})
		if err != nil {
			return nil, fmt.Errorf("read the %s of executor %s of %s from worker %s at %s: %w", stream, e.GetId(), r.app, e.GetWorkerId(), addr, err)
		}
		r.offsets[key] = resp.GetNextOffset()
		buf := append(r.partial[key], resp.GetData()...)
		for {
			i := bytes.IndexByte(buf, '\n')
			if i < 0 {
				break
			}
			lines = append(lines, string(buf[:i]))
			buf = buf[i+1:]
		}
		r.partial[key] = append([]byte(nil), buf...)
		if len(resp.GetData()) == 0 || resp.GetNextOffset() >= resp.GetSize() {
			break
		}
	}
	if last && len(r.partial[key]) > 0 {
		lines = append(lines, string(r.partial[key]))
		r.partial[key] = nil
	}
	return lines, nil
}

func (r *AppLogReader) conn(addr string) (*grpc.ClientConn, error) {
	if c, ok := r.conns[addr]; ok {
		return c, nil
	}
	c, err := rpc.NewClient(addr, rpc.ClientConfig{Options: r.cl.Credentials().DialOptionsTo(secure.WorkerAudience(addr))})
	if err != nil {
		return nil, fmt.Errorf("dial worker %s: %w", addr, err)
	}
	r.conns[addr] = c
	return c, nil
}

// Close closes the reader's connections to workers.
func (r *AppLogReader) Close() {
	for _, c := range r.conns {
		_ = c.Close()
	}
}

func clusterStatus(ctx context.Context, cl *client.Client) (*pb.ClusterStatusResponse, error) {
	var st *pb.ClusterStatusResponse
	err := cl.Call(ctx, false, func(ctx context.Context, m pb.MasterClient) error {
		resp, err := m.ClusterStatus(ctx, &pb.ClusterStatusRequest{})
		st = resp
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("ask the masters %s for the cluster state: %w", strings.Join(cl.Masters(), ","), err)
	}
	return st, nil
}
