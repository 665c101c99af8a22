package warm

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// jobsFile is the file in a session's directory that holds the number of
// the session's last job; spindle.Session (the Python package's
// _session.next_job) counts in it too.
const jobsFile = "jobs"

// NextJob counts one more job in the session whose directory is dir and
// returns its number (1 for the first). The caller holds the session's
// run lock. The number is the session's, not the caller's, so that jobs
// from spindle.Session and from spindle submit --session take their turns
// on the session's feed: job n reads its epochs (n-1)*E to n*E-1.
func NextJob(dir string) (int, error) {
	path := filepath.Join(dir, jobsFile)
	last := 0
	b, err := os.ReadFile(path)
	switch {
	case err == nil:
		if last, err = strconv.Atoi(strings.TrimSpace(string(b))); err != nil || last < 0 {
			return 0, fmt.Errorf("session job count %s: %q is not a count", path, b)
		}
	case !os.IsNotExist(err):
		return 0, fmt.Errorf("session job count: %w", err)
	}
	// Replaced whole, so that a run killed while counting leaves the old
	// count, not an empty file; the run lock keeps other writers out.
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(strconv.Itoa(last+1)), 0o600); err != nil {
		return 0, fmt.Errorf("session job count: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("session job count: %w", err)
	}
	return last + 1, nil
}
