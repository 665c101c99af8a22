package executor

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/spindle-ml/spindle/driver/driverpb"
	"github.com/spindle-ml/spindle/python"
)

// TestTrainingEnvCarriesEmbeddedPython checks that with no
// spindle.python.path the training process gets the package this binary
// carries, unpacked into the user's cache, whatever directory the binary
// sits in.
func TestTrainingEnvCarriesEmbeddedPython(t *testing.T) {
	xdg := t.TempDir()
	t.Setenv("XDG_CACHE_HOME", xdg)
	task := &Task{JobId: "job-1", Feed: &FeedTask{Mode: "tensor"}}
	id := identity{rank: 0, worldSize: 1, localWorldSize: 1, host: "127.0.0.1",
		peers: []*driverpb.Peer{{Rank: 0, Host: "127.0.0.1", Ports: []uint32{5000, 5001}}}}
	for _, tc := range []struct {
		name, base, want string
	}{
		{"no PYTHONPATH before", "", filepath.Join(xdg, "spindle", "python", python.Version())},
		{"user PYTHONPATH kept after", "/home/me/lib",
			filepath.Join(xdg, "spindle", "python", python.Version()) + string(os.PathListSeparator) + "/home/me/lib"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := []string{"PATH=/usr/bin"}
			if tc.base != "" {
				base = append(base, "PYTHONPATH="+tc.base)
			}
			env, err := trainingEnv(base, task, id, "s3cret", "/w/feed.sock", "/w/files", "/w")
			if err != nil {
				t.Fatal(err)
			}
			got := envMap(env)["PYTHONPATH"]
			if got != tc.want {
				t.Fatalf("PYTHONPATH = %q, want %q", got, tc.want)
			}
			init := filepath.Join(xdg, "spindle", "python", python.Version(), python.PackageName, "__init__.py")
			if _, err := os.Stat(init); err != nil {
				t.Fatalf("the package was not unpacked: %v", err)
			}
		})
	}
}
