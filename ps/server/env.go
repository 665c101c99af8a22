package server

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"os"
	"strconv"
	"time"

	"google.golang.org/grpc/credentials"

	"github.com/spindle-ml/spindle/collective"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/internal/peercred"
	"github.com/spindle-ml/spindle/ps"
)

// memoryShare is the part of a server's memory its rows may take: the
// rest is the runtime's and the calls' in flight.
const memoryShare = 0.8

// Rank is what Run takes from a ps rank's start: its place in the job,
// its peer port, bound already, and where its totals go.
type Rank struct {
	Ranks    ps.Ranks
	Listener net.Listener
	// Report sends the server's totals (the executor's report socket, for
	// the web UI and /metrics); nil drops them.
	Report func(values map[string]float64)
}

// Run runs the parameter server of a ps rank started by an executor
// (spindle ps serve) until ctx ends: it serves on the rank's peer port,
// for the job's other ranks as workers, with the settings of SPINDLE_PS_*.
// Errors of bad input wrap ps.ErrBadEnv and name the variable at fault.
// Run closes the listener.
func Run(ctx context.Context, rk Rank, logger *slog.Logger) error {
	env, ln := rk.Ranks, rk.Listener
	if err := env.CheckServer(); err != nil {
		ln.Close()
		return err
	}
	n, workers := env.Servers, env.WorldSize-env.Servers
	settings, err := settingsFromEnv()
	if err != nil {
		ln.Close()
		return err
	}
	creds, err := peercred.New(env.PeerToken, ps.Purpose)
	if err != nil {
		ln.Close()
		return fmt.Errorf("%w: %s: %v", ps.ErrBadEnv, envcontract.PeerToken, err)
	}
	ring, err := ps.NewRing(1, env.ServerAddrs(), 0)
	if err != nil {
		ln.Close()
		return err
	}
	link := os.Getenv(envcontract.CollectiveLink)
	if _, err := collective.ParseLinkSpec(link); err != nil {
		ln.Close()
		return fmt.Errorf("%w: %v", ps.ErrBadEnv, err)
	}
	s, err := New(Config{Index: env.RoleRank, Ring: ring, Workers: workers, Staleness: settings.staleness,
		WaitTimeout: settings.wait, MemoryBytes: settings.memory, Replicas: settings.replicas, PeerCreds: creds, DataLink: link, Logger: logger})
	if err != nil {
		ln.Close()
		return err
	}
	logger.Info("parameter server serving", "server", env.RoleRank, "servers", n, "workers", workers,
		"consistency", settings.staleness.String(), "replicas", settings.replicas, "addr", env.Peers[env.Rank], "memory_mib", settings.memory>>20)
	reportCtx, stopReports := context.WithCancel(ctx)
	reported := make(chan struct{})
	go func() { defer close(reported); s.reportEvery(reportCtx, reportInterval, rk.Report) }()
	if os.Getenv(envcontract.PSRejoin) != "1" {
		err = s.Serve(ctx, ln, creds)
	} else {
		err = serveRejoined(ctx, s, ln, creds, env.Peers[env.Rank])
	}
	stopReports()
	<-reported
	return err
}

// settings are a server's SPINDLE_PS_* settings.
type settings struct {
	staleness ps.Staleness
	wait      time.Duration
	memory    int64
	replicas  int
}

// settingsFromEnv reads the SPINDLE_PS_* settings; errors wrap
// ps.ErrBadEnv and name the variable.
func settingsFromEnv() (settings, error) {
	staleness, err := ps.ParseStaleness(os.Getenv(envcontract.PSStaleness))
	if err != nil {
		return settings{}, fmt.Errorf("%w: %s: %v", ps.ErrBadEnv, envcontract.PSStaleness, err)
	}
	var wait time.Duration
	if v := os.Getenv(envcontract.PSWaitTimeout); v != "" {
		secs, err := strconv.ParseFloat(v, 64)
		if err != nil || secs < 0 {
			return settings{}, fmt.Errorf("%w: %s=%s: want seconds", ps.ErrBadEnv, envcontract.PSWaitTimeout, v)
		}
		wait = time.Duration(secs * float64(time.Second))
	}
	var memory int64
	if v := os.Getenv(envcontract.PSMemory); v != "" {
		mb, err := strconv.ParseInt(v, 10, 64)
		if err != nil || mb < 0 {
			return settings{}, fmt.Errorf("%w: %s=%s: want MiB", ps.ErrBadEnv, envcontract.PSMemory, v)
		}
		memory = int64(float64(mb<<20) * memoryShare)
	}
	replicas := 0
	if v := os.Getenv(envcontract.PSReplicas); v != "" {
		if replicas, err = strconv.Atoi(v); err != nil || replicas < 0 {
			return settings{}, fmt.Errorf("%w: %s=%s: want a number of backups ≥ 0", ps.ErrBadEnv, envcontract.PSReplicas, v)
		}
	}
	return settings{staleness: staleness, wait: wait, memory: memory, replicas: replicas}, nil
}

// serveRejoined serves a replacement for a dead server: it serves first,
// since the others copy it its rows while it rejoins, and fails when it
// cannot rejoin.
func serveRejoined(ctx context.Context, s *Server, ln net.Listener, creds credentials.TransportCredentials, addr string) error {
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, creds) }()
	joinCtx, stop := context.WithTimeout(ctx, s.cfg.RejoinTimeout)
	err := s.Join(joinCtx, addr)
	stop()
	if err != nil {
		cancel(err)
		<-served
		return err
	}
	return <-served
}

// reportInterval is how often a server reports its totals: often enough
// that a job of a few seconds shows them, and its event log keeps them,
// before the server's last report at its end (which can come after the
// job's event log closed).
const reportInterval = time.Second

// reportEvery sends the server's totals to the executor's report socket
// until ctx ends, and once more then: the job's web UI shows them, and the
// driver's /metrics turns them into the spindle_ps_* metrics
// (observe/metrics reads these names).
func (s *Server) reportEvery(ctx context.Context, every time.Duration, send func(map[string]float64)) {
	if send == nil {
		<-ctx.Done()
		return
	}
	t := time.NewTicker(every)
	defer t.Stop()
	report := func() { send(s.Report()) }
	for {
		select {
		case <-ctx.Done():
			report()
			return
		case <-t.C:
			report()
		}
	}
}
