package driver

import (
	"context"
	"time"
)

// ExecutorSpec describes one executor the driver wants started.
type ExecutorSpec struct {
	// ID names the executor within the job.
	ID string
	// Role is what the executor does in the job (worker, chief, ps);
	// cluster managers show it and may place roles differently.
	Role Role
	// Args are the arguments of the spindle binary that runs the executor
	// ("executor", "--driver", ...). Each cluster manager runs them with
	// its own copy of spindle.
	Args []string
	// Env is added to the executor's environment. It carries the job
	// secret, so cluster managers must never log it.
	Env map[string]string
	// Resources the executor needs, as its role asks.
	Cores    int
	MemoryMB int
	GPUs     int
	// SharedMemoryMB is memory the executor maps shared with its training
	// process (the feed's shared memory; Config.SharedFeedMB), on top of
	// MemoryMB. Each process counts the pages it touched in its resident
	// size, so a cluster manager that limits the sum of a container's
	// resident sizes adds it to the container's memory.
	SharedMemoryMB int `json:",omitempty"`
	// PreferredHosts are hosts holding the executor's input (locality hints).
	PreferredHosts []string
	// ExcludedHosts are hosts where the job's ranks or executors failed
	// repeatedly (spindle.failure.hostMaxFailures): cluster managers that
	// choose hosts must not place the executor there.
	ExcludedHosts []string
}

// EventKind says what happened to an executor.
type EventKind int

// Executor events.
const (
	// ExecutorStarted: the executor process is running on Host.
	ExecutorStarted EventKind = iota + 1
	// ExecutorExited: the executor process ended; ExitCode says how.
	ExecutorExited
	// ExecutorLost: the executor's host or container is gone (a worker or
	// node died); its process state is unknown.
	ExecutorLost
)

func (k EventKind) String() string {
	switch k {
	case ExecutorStarted:
		return "started"
	case ExecutorExited:
		return "exited"
	case ExecutorLost:
		return "lost"
	}
	return "unknown"
}

// Event reports a change in an executor's state.
type Event struct {
	ExecutorID string
	Kind       EventKind
	Host       string
	// Node is the cluster manager's own name for where the executor runs,
	// when it is finer than Host (a standalone worker's id: several
	// workers may share a host). ExcludedHosts may name it.
	Node string
	// ExitCode is the process exit status for ExecutorExited (-1 when killed by a signal).
	ExitCode int
	// Message explains the event ("worker w2 stopped heartbeating", "signal: killed").
	Message string
	// Blameless marks an exit or loss that was not the job's fault: the
	// cluster took the executor back (YARN preempted its container or lost
	// its node, a standalone worker left). Such a loss does not count
	// against spindle.failure.maxRestarts.
	Blameless bool
	Time      time.Time
}

// ClusterManager gets executors for a job from somewhere: local child
// processes, Spindle's standalone masters, or YARN.
type ClusterManager interface {
	// Request starts every executor in specs, all or nothing: it returns
	// once each one has been placed and launched, or an error (and nothing
	// left running) when the gang cannot be placed before ctx ends.
	Request(ctx context.Context, specs []ExecutorSpec) error
	// Release stops the named executors (all of them when ids is empty)
	// and waits, within ctx, until they are gone.
	Release(ctx context.Context, ids []string) error
	// Events delivers executor events until Close.
	Events() <-chan Event
	// Close releases everything the manager holds; no executor it started
	// keeps running.
	Close() error
}
