package master

import (
	"context"
	"fmt"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

// refuseDuplicate refuses a worker that registers under the id of another
// worker process (another incarnation) that still answers at its address:
// two workers with one id would each replace the other's registration and
// the masters would take the running jobs' executors for gone. A worker
// whose old process is dead (a restart) takes its id over.
func (ls *leaderState) refuseDuplicate(ctx context.Context, req *pb.RegisterWorkerRequest) error {
	var old Worker
	var found bool
	ls.m.fsm.read(func(st *State, _ uint64) {
		w, ok := st.Workers[req.GetId()]
		if ok && w.Alive && w.Incarnation != req.GetIncarnation() {
			old, found = *w, true
		}
	})
	if !found || !ls.m.workerAnswers(ctx, old.Addr) {
		return nil
	}
	return fmt.Errorf("%w: worker id %s is taken by the running worker at %s; the worker at %s was refused (give each worker its own --id)",
		apierr.ErrDuplicateID, req.GetId(), old.Addr, req.GetAddr())
}

// workerAnswers reports whether a worker process answers at addr: any
// answer but an unreachable one counts (the probe names no executor).
func (m *Master) workerAnswers(ctx context.Context, addr string) bool {
	c, err := m.workerClient(addr)
	if err != nil {
		return false
	}
	ctx, cancel := context.WithTimeout(ctx, m.cfg.ProbeTimeout)
	defer cancel()
	_, err = c.ReadLog(ctx, &pb.ReadLogRequest{AppId: "-", ExecutorId: "-", Stream: "stdout"})
	switch status.Code(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return false
	}
	return true
}
