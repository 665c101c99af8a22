package worker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"github.com/spindle-ml/spindle/standalone/internal/apierr"
	pb "github.com/spindle-ml/spindle/standalone/standalonepb"
)

const (
	sigTerm = syscall.SIGTERM
	sigKill = syscall.SIGKILL
)

// maxLogChunk bounds one ReadLog reply.
const maxLogChunk = 1 << 20

// service implements the Worker gRPC API. The server's interceptors have
// already refused every call not signed with the cluster secret.
type service struct {
	pb.UnimplementedWorkerServer
	w *Worker
}

var _ pb.WorkerServer = (*service)(nil)

func (s *service) check(workerID, app string, ids ...string) error {
	if workerID != s.w.id {
		return fmt.Errorf("%w: worker %s was called for worker %q", apierr.ErrWrongWorker, s.w.id, workerID)
	}
	if !nameRE.MatchString(app) {
		return fmt.Errorf("%w: application id %q", apierr.ErrBadRequest, app)
	}
	for _, id := range ids {
		if !nameRE.MatchString(id) {
			return fmt.Errorf("%w: executor id %q", apierr.ErrBadRequest, id)
		}
	}
	return nil
}

// Launch starts an executor; launching one that runs, or again the
// placement of one that ran and ended, is a no-op.
func (s *service) Launch(ctx context.Context, req *pb.LaunchRequest) (*pb.LaunchResponse, error) {
	w := s.w
	if err := s.check(req.GetWorkerId(), req.GetAppId(), req.GetExecutorId()); err != nil {
		return nil, err
	}
	if len(req.GetArgs()) == 0 {
		return nil, fmt.Errorf("%w: executor %s has no arguments", apierr.ErrBadRequest, req.GetExecutorId())
	}
	var gpus []int
	for _, g := range req.GetGpus() {
		if g < 0 || int(g) >= w.cfg.GPUs {
			return nil, fmt.Errorf("%w: GPU %d: worker %s has %d", apierr.ErrBadRequest, g, w.id, w.cfg.GPUs)
		}
		gpus = append(gpus, int(g))
	}
	key := req.GetAppId() + "/" + req.GetExecutorId()
	w.mu.Lock()
	if w.stopping {
		w.mu.Unlock()
		return nil, fmt.Errorf("%w: worker %s is shutting down", apierr.ErrStopped, w.id)
	}
	if p, ok := w.procs[key]; ok && (!p.exited || p.launchID != "" && p.launchID == req.GetLaunchId()) {
		// Running, or a retry of a launch whose run has already ended
		// (its answer was lost): the executor is not started twice.
		w.mu.Unlock()
		return &pb.LaunchResponse{Pid: int32(p.pid), WorkDir: p.dir}, nil
	}
	if _, ended := w.ended[req.GetAppId()]; ended {
		w.mu.Unlock()
		return nil, fmt.Errorf("%w: %s", apierr.ErrAppEnded, req.GetAppId())
	}
	// Hold the slot while starting, so a concurrent retry does not start
	// a second process.
	placeholder := &proc{app: req.GetAppId(), id: req.GetExecutorId(), done: make(chan struct{})}
	w.procs[key] = placeholder
	w.mu.Unlock()

	p, err := w.start(launchSpec{
		app: req.GetAppId(), id: req.GetExecutorId(), launchID: req.GetLaunchId(), args: req.GetArgs(), env: req.GetEnv(),
		cores: int(req.GetCores()), memoryMB: req.GetMemoryMb(), gpus: gpus,
	})
	w.mu.Lock()
	if err != nil {
		delete(w.procs, key)
		w.mu.Unlock()
		w.logger.Warn("executor launch failed", "app", req.GetAppId(), "executor", req.GetExecutorId(), "err", err)
		return nil, fmt.Errorf("worker %s: %w", w.id, err)
	}
	w.procs[key] = p
	w.reapers.Add(1)
	w.mu.Unlock()
	go func() {
		defer w.reapers.Done()
		w.reap(p)
	}()
	w.logger.Info("executor launched", "app", p.app, "executor", p.id, "pid", p.pid,
		"cores", req.GetCores(), "memory_mb", req.GetMemoryMb(), "gpus", gpus, "cgroup", p.cgroup != "")
	return &pb.LaunchResponse{Pid: int32(p.pid), WorkDir: p.dir}, nil
}

// StopExecutors stops executors and returns their final states.
func (s *service) StopExecutors(ctx context.Context, req *pb.StopExecutorsRequest) (*pb.StopExecutorsResponse, error) {
	w := s.w
	if err := s.check(req.GetWorkerId(), req.GetAppId(), req.GetExecutorIds()...); err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, id := range req.GetExecutorIds() {
		want[id] = true
	}
	var targets, running []*proc
	w.mu.Lock()
	for _, p := range w.procs {
		if p.app != req.GetAppId() || (len(want) > 0 && !want[p.id]) || p.cmd == nil {
			continue
		}
		targets = append(targets, p)
		if !p.exited {
			running = append(running, p)
		}
	}
	if req.GetAppEnded() {
		if _, ok := w.ended[req.GetAppId()]; !ok {
			w.ended[req.GetAppId()] = time.Now()
		}
	}
	w.mu.Unlock()
	grace := time.Duration(req.GetGraceMs()) * time.Millisecond
	if grace <= 0 {
		grace = w.cfg.StopGrace
	}
	reason := req.GetReason()
	if reason == "" {
		reason = "the masters asked"
	}
	if len(running) > 0 {
		w.logger.Info("stopping executors", "app", req.GetAppId(), "count", len(running), "reason", reason)
		w.stopProcs(ctx, running, grace, reason)
	}
	resp := &pb.StopExecutorsResponse{}
	w.mu.Lock()
	for _, p := range targets {
		resp.Executors = append(resp.Executors, p.report())
	}
	w.mu.Unlock()
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return resp, nil
}

// ReadLog returns part of an executor's stdout or stderr.
func (s *service) ReadLog(ctx context.Context, req *pb.ReadLogRequest) (*pb.ReadLogResponse, error) {
	w := s.w
	if err := s.check(w.id, req.GetAppId(), req.GetExecutorId()); err != nil {
		return nil, err
	}
	if req.GetStream() != "stdout" && req.GetStream() != "stderr" {
		return nil, fmt.Errorf("%w: log stream %q: want stdout or stderr", apierr.ErrBadRequest, req.GetStream())
	}
	limit := int64(req.GetLimit())
	if limit <= 0 || limit > maxLogChunk {
		limit = maxLogChunk
	}
	dir := filepath.Join(w.cfg.WorkDir, req.GetAppId(), req.GetExecutorId())
	data, next, size, err := readLog(dir, req.GetStream(), req.GetOffset(), limit)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, fmt.Errorf("%w: no %s log for executor %s of %s on worker %s",
				apierr.ErrUnknownApp, req.GetStream(), req.GetExecutorId(), req.GetAppId(), w.id)
		}
		return nil, fmt.Errorf("read executor log: %w", err)
	}
	return &pb.ReadLogResponse{Data: data, NextOffset: next, Size: size}, nil
}
