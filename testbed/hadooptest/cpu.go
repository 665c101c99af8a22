package hadooptest

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// clockTicks is the kernel's USER_HZ, the unit of /proc/<pid>/stat's
// times: 100 on every Linux architecture Go runs on.
const clockTicks = 100

// CPU returns the processor time the mini cluster has used so far: its
// JVM's user and system time (the namenode, datanodes, ResourceManager and
// NodeManagers, localization included) and that of the containers it has
// started and reaped. A benchmark subtracts two readings to charge a job
// with what the cluster spent on it, a figure load moves less than wall
// time.
func (c *Cluster) CPU() (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", c.cmd.Process.Pid))
	if err != nil {
		return 0, fmt.Errorf("hadoop mini cluster's processor time: %w", err)
	}
	// The command name, in parentheses, may hold spaces: the fields
	// counted from it on are utime (14), stime, cutime and cstime (17).
	s := string(b)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	if len(fields) < 15 {
		return 0, fmt.Errorf("hadoop mini cluster's processor time: /proc stat has %d fields", len(fields))
	}
	var ticks int64
	for _, f := range fields[11:15] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("hadoop mini cluster's processor time: %q: %w", f, err)
		}
		ticks += n
	}
	return time.Duration(ticks) * time.Second / clockTicks, nil
}
