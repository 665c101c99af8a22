package worker

import (
	"bufio"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/standalone/internal/secure"
)

// ErrConfig is wrapped by every configuration error.
var ErrConfig = errors.New("worker: invalid configuration")

// Config configures a worker.
type Config struct {
	// ID names the worker; empty uses advertise-host-port.
	ID string
	// Masters are the masters' gRPC addresses (host:port).
	Masters []string
	// Secret is the cluster secret; TLS optionally enables mutual TLS.
	Secret string
	TLS    secure.TLSFiles
	// Addr is where the worker's gRPC service listens.
	Addr string
	// AdvertiseHost is the host masters dial and executors are reached at;
	// empty uses the host of Addr, or this machine's name when Addr binds
	// every interface.
	AdvertiseHost string

	// Cores, MemoryMB and GPUs offered to executors. Cores 0 offers every
	// CPU, MemoryMB 0 all memory but 1 GiB, GPUs -1 every /dev/nvidiaN.
	Cores    int
	MemoryMB int64
	GPUs     int

	// WorkDir holds one directory per application and executor.
	WorkDir string
	// Binary is the program executors run; empty is this process's own
	// executable (the spindle binary).
	Binary string

	HeartbeatInterval time.Duration
	// StopGrace is the default time between SIGTERM and SIGKILL.
	StopGrace time.Duration
	// OutputWaitDelay bounds how long reaping an executor waits for its
	// output pipes to close once it exited (zero: DefaultOutputWaitDelay).
	OutputWaitDelay time.Duration
	// FinalHeartbeatTimeout bounds the heartbeat a worker sends the
	// masters as it shuts down (zero: DefaultFinalHeartbeatTimeout).
	FinalHeartbeatTimeout time.Duration
	// CleanupDelay is how long an ended application's directory (and its
	// executors' logs) is kept.
	CleanupDelay time.Duration
	// LogMaxBytes bounds each executor output file before it is rotated
	// (0: never); LogMaxFiles old files are kept per stream.
	LogMaxBytes int64
	LogMaxFiles int

	// CgroupRoot is where cgroup v2 is mounted; CgroupParent is the cgroup
	// (relative to the root) under which executors' cgroups are made,
	// empty for the worker's own.
	CgroupRoot   string
	CgroupParent string
	// DisableCgroups runs executors without limits.
	DisableCgroups bool

	Logger *slog.Logger
	// Listener is an already bound listener (tests); nil binds Addr.
	Listener net.Listener
}

// Defaults of the bounds Config holds but the config package's key table
// does not: New gives them to zero fields.
const (
	DefaultOutputWaitDelay       = 2 * time.Second
	DefaultFinalHeartbeatTimeout = 2 * time.Second
)

// DefaultConfig returns the defaults, the same as the config package's
// key table.
func DefaultConfig() Config {
	return Config{
		Addr:                  "0.0.0.0:7078",
		GPUs:                  -1,
		WorkDir:               filepath.Join(os.TempDir(), "spindle-worker"),
		HeartbeatInterval:     time.Second,
		StopGrace:             5 * time.Second,
		OutputWaitDelay:       DefaultOutputWaitDelay,
		FinalHeartbeatTimeout: DefaultFinalHeartbeatTimeout,
		CleanupDelay:          24 * time.Hour,
		LogMaxBytes:           128 << 20,
		LogMaxFiles:           4,
		CgroupRoot:            "/sys/fs/cgroup",
	}
}

// nameRE is what ids that become directory names may look like.
var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)

// Validate checks the configuration and fills in detected resources.
func (c *Config) Validate() error {
	bad := func(format string, a ...any) error {
		return fmt.Errorf("%w: %s", ErrConfig, fmt.Sprintf(format, a...))
	}
	if len(c.Masters) == 0 {
		return bad("no masters (--masters host:port,host:port)")
	}
	if c.WorkDir == "" {
		return bad("no work directory (--work-dir)")
	}
	if c.HeartbeatInterval <= 0 {
		return bad("heartbeat interval %s must be positive", c.HeartbeatInterval)
	}
	if c.LogMaxBytes < 0 || c.LogMaxFiles < 0 {
		return bad("executor logs: %d bytes, %d old files: neither may be negative", c.LogMaxBytes, c.LogMaxFiles)
	}
	if c.Cores < 0 || c.MemoryMB < 0 || c.GPUs < -1 {
		return bad("cores %d, memory %d MiB, GPUs %d: none may be negative", c.Cores, c.MemoryMB, c.GPUs)
	}
	if c.Cores == 0 {
		c.Cores = runtime.NumCPU()
	}
	if c.MemoryMB == 0 {
		total, err := totalMemoryMB()
		if err != nil {
			return bad("detect memory: %v; give --memory", err)
		}
		c.MemoryMB = max(total-1024, total/2)
	}
	if c.GPUs < 0 {
		c.GPUs = countGPUs()
	}
	if c.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return bad("find the spindle binary: %v", err)
		}
		c.Binary = exe
	}
	if c.ID != "" && !nameRE.MatchString(c.ID) {
		return bad("worker id %q: use letters, digits, dot, dash and underscore", c.ID)
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return nil
}

// totalMemoryMB reads MemTotal from /proc/meminfo.
func totalMemoryMB() (int64, error) {
	f, err := os.Open("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) >= 2 && fields[0] == "MemTotal:" {
			kb, err := strconv.ParseInt(fields[1], 10, 64)
			if err != nil {
				return 0, fmt.Errorf("parse MemTotal: %w", err)
			}
			return kb / 1024, nil
		}
	}
	return 0, errors.New("no MemTotal in /proc/meminfo")
}

// countGPUs counts NVIDIA device nodes.
func countGPUs() int {
	matches, _ := filepath.Glob("/dev/nvidia[0-9]*")
	return len(matches)
}
