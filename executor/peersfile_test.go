package executor

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/internal/envcontract"
	"github.com/spindle-ml/spindle/task"
)

// bigWorld returns rank's identity in a world of n ranks with host names
// like a large cluster's (38 characters), 8 ranks a host.
func bigWorld(n, rank int) identity {
	id := identity{rank: rank, worldSize: n, localWorldSize: 8, host: "h"}
	for r := range n {
		id.peers = append(id.peers, &driverpb.Peer{Rank: int32(r),
			Host: fmt.Sprintf("worker-%04d.rack%03d.cluster.example.com", r/8, r/320), Ports: []uint32{40000 + uint32(r%8), 41000}})
	}
	return id
}

// TestPeersInAFile starts a rank of a 5,000-rank job: its peer list
// (about 230 KB) cannot be an environment variable, so it goes to a file
// only the job's user reads, and the Go task package and the Python
// package both read every rank's address from it.
func TestPeersInAFile(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	const world, rank = 5000, 4321
	id := bigWorld(world, rank)
	work := t.TempDir()
	env, err := trainingEnv([]string{"PATH=" + os.Getenv("PATH")}, &Task{JobId: "j", Feed: &FeedTask{}, CollectiveTimeoutMillis: 30000}, id, "s3cret", "",
		filepath.Join(work, "files"), work)
	if err != nil {
		t.Fatalf("environment of rank %d of %d: %v", rank, world, err)
	}
	got := envMap(env)
	for _, kv := range env {
		if len(kv)+1 > envcontract.MaxVarBytes {
			k, _, _ := strings.Cut(kv, "=")
			t.Errorf("%s is %d bytes, over Linux's limit", k, len(kv))
		}
	}
	if _, ok := got[envcontract.Peers]; ok {
		t.Errorf("%s set as well as the file", envcontract.Peers)
	}
	path := got[envcontract.PeersFile]
	if path != filepath.Join(work, "peers") {
		t.Fatalf("%s = %q, want the work directory's peers file", envcontract.PeersFile, path)
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("peers file: %v, mode %v; want 0600", err, fi.Mode())
	}
	want, _, _ := peerAddrs(id)

	for k, v := range got {
		t.Setenv(k, v)
	}
	e, err := task.FromEnv()
	if err != nil {
		t.Fatalf("task reader: %v", err)
	}
	if len(e.Peers) != world || e.Peers[0] != want[0] || e.Peers[rank] != want[rank] || e.Peers[world-1] != want[world-1] {
		t.Fatalf("task reader: %d peers, rank %d at %q; want %d, %q", len(e.Peers), rank, e.Peers[rank], world, want[rank])
	}

	// Debian's, as the README's test command runs the Python tests with.
	const python = "/usr/bin/python3"
	if _, err := os.Stat(python); err != nil {
		t.Skipf("no %s for the Python reader", python)
	}
	cmd := exec.Command(python, "-c", "import spindle; p = spindle.peers(); print(len(p), '%s:%d' % p[spindle.rank()])")
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("python reader: %v\n%s", err, out)
	}
	if w := fmt.Sprintf("%d %s", world, want[rank]); strings.TrimSpace(string(out)) != w {
		t.Fatalf("python reader printed %q, want %q", out, w)
	}
}

// TestPeersFitInTheVariable keeps a list that fits where it always was,
// with no file written.
func TestPeersFitInTheVariable(t *testing.T) {
	t.Setenv("XDG_CACHE_HOME", t.TempDir())
	work := t.TempDir()
	env, err := trainingEnv(nil, &Task{JobId: "j", Feed: &FeedTask{}}, bigWorld(2000, 3), "s3cret", "", filepath.Join(work, "files"), work)
	if err != nil {
		t.Fatal(err)
	}
	got := envMap(env)
	if got[envcontract.Peers] == "" || got[envcontract.PeersFile] != "" || got[envcontract.TFConfig] == "" {
		t.Fatalf("2,000 ranks: %s %d bytes, %s %q, %s %d bytes; want the variables", envcontract.Peers, len(got[envcontract.Peers]),
			envcontract.PeersFile, got[envcontract.PeersFile], envcontract.TFConfig, len(got[envcontract.TFConfig]))
	}
	if _, err := os.Stat(filepath.Join(work, "peers")); !os.IsNotExist(err) {
		t.Errorf("a peers file was written for a list that fits: %v", err)
	}
}
