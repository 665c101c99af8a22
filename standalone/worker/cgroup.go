package worker

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// cgroups makes one cgroup v2 per executor, with cpu.max and memory.max
// set from the executor's cores and memory, under a base cgroup of the
// worker's.
type cgroups struct {
	base string // absolute directory of the worker's base cgroup
}

// cgroupPeriod is the CPU bandwidth period in microseconds.
const cgroupPeriod = 100000

// setupCgroups prepares the base cgroup under parent (relative to root;
// empty: the worker's own cgroup). When cgroup v2 or its cpu and memory
// controllers are not available to this process it returns nil and the
// reason.
func setupCgroups(root, parent, workerID string) (*cgroups, error) {
	if _, err := os.Stat(filepath.Join(root, "cgroup.controllers")); err != nil {
		return nil, fmt.Errorf("cgroup v2 is not mounted at %s (no cgroup.controllers; a cgroup v1 or hybrid host)", root)
	}
	own := false
	if parent == "" {
		p, err := ownCgroup("/proc/self/cgroup")
		if err != nil {
			return nil, err
		}
		parent, own = p, true
	}
	dir := filepath.Join(root, filepath.Clean("/"+parent))
	ctrls, err := os.ReadFile(filepath.Join(dir, "cgroup.controllers"))
	if err != nil {
		return nil, fmt.Errorf("read controllers of cgroup %s: %w", dir, err)
	}
	have := strings.Fields(string(ctrls))
	if !contains(have, "cpu") || !contains(have, "memory") {
		return nil, fmt.Errorf("cgroup %s does not offer the cpu and memory controllers (it offers %q); delegate them to the worker", dir, strings.Join(have, " "))
	}
	if err := enableControllers(dir); err != nil {
		if !own || !errors.Is(err, syscall.EBUSY) {
			return nil, fmt.Errorf("enable cpu and memory controllers in %s: %w", dir, err)
		}
		// A cgroup with processes in it cannot hand controllers down (the
		// "no internal processes" rule): move the worker into a leaf of its
		// own first.
		leaf := filepath.Join(dir, "spindle-worker")
		if err := os.MkdirAll(leaf, 0o755); err != nil {
			return nil, fmt.Errorf("create cgroup %s: %w", leaf, err)
		}
		if err := os.WriteFile(filepath.Join(leaf, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
			return nil, fmt.Errorf("move the worker into cgroup %s: %w", leaf, err)
		}
		if err := enableControllers(dir); err != nil {
			// Put the worker back where it was.
			_ = os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(os.Getpid())), 0o644)
			_ = syscall.Rmdir(leaf)
			return nil, fmt.Errorf("enable cpu and memory controllers in %s: %w (other processes share the worker's cgroup; set spindle.worker.cgroupParent)", dir, err)
		}
	}
	base := filepath.Join(dir, "spindle-executors-"+workerID)
	if err := os.MkdirAll(base, 0o755); err != nil {
		return nil, fmt.Errorf("create cgroup %s: %w", base, err)
	}
	if err := enableControllers(base); err != nil {
		return nil, fmt.Errorf("enable cpu and memory controllers in %s: %w", base, err)
	}
	return &cgroups{base: base}, nil
}

func enableControllers(dir string) error {
	return os.WriteFile(filepath.Join(dir, "cgroup.subtree_control"), []byte("+cpu +memory"), 0o644)
}

// ownCgroup returns this process's cgroup v2 path from /proc/self/cgroup.
func ownCgroup(procFile string) (string, error) {
	f, err := os.Open(procFile)
	if err != nil {
		return "", fmt.Errorf("find the worker's cgroup: %w", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if p, ok := strings.CutPrefix(sc.Text(), "0::"); ok {
			return p, nil
		}
	}
	return "", fmt.Errorf("find the worker's cgroup: no cgroup v2 entry in %s", procFile)
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// create makes the cgroup of one executor with its limits and returns its
// directory.
func (c *cgroups) create(name string, cores int, memoryMB int64) (string, error) {
	dir := filepath.Join(c.base, name)
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return "", fmt.Errorf("create cgroup %s: %w", dir, err)
	}
	if cores > 0 {
		quota := fmt.Sprintf("%d %d", cores*cgroupPeriod, cgroupPeriod)
		if err := os.WriteFile(filepath.Join(dir, "cpu.max"), []byte(quota), 0o644); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("set cpu.max of %s: %w", dir, err)
		}
	}
	if memoryMB > 0 {
		limit := strconv.FormatInt(memoryMB<<20, 10)
		if err := os.WriteFile(filepath.Join(dir, "memory.max"), []byte(limit), 0o644); err != nil {
			_ = os.Remove(dir)
			return "", fmt.Errorf("set memory.max of %s: %w", dir, err)
		}
	}
	return dir, nil
}

// addProcess moves pid into the cgroup at dir.
func addProcess(dir string, pid int) error {
	if err := os.WriteFile(filepath.Join(dir, "cgroup.procs"), []byte(strconv.Itoa(pid)), 0o644); err != nil {
		return fmt.Errorf("move process %d into cgroup %s: %w", pid, dir, err)
	}
	return nil
}

// remove deletes an executor's cgroup once its processes are gone. The
// kernel may take a moment to notice the last one left.
func removeCgroup(dir string) error {
	var err error
	for i := 0; i < 20; i++ {
		if err = syscall.Rmdir(dir); err == nil || errors.Is(err, syscall.ENOENT) {
			return nil
		}
		if !errors.Is(err, syscall.EBUSY) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A fake cgroup tree (tests) holds regular files: remove them too.
	if rerr := os.RemoveAll(dir); rerr == nil {
		return nil
	}
	return fmt.Errorf("remove cgroup %s: %w", dir, err)
}
