package gpu

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
)

// deviceRE matches the device node of one NVIDIA GPU (nvidia0, nvidia1,
// ...), not the driver's control nodes (nvidiactl, nvidia-uvm).
var deviceRE = regexp.MustCompile(`^nvidia[0-9]+$`)

// Count returns the number of NVIDIA GPUs whose device nodes are under
// root's /dev: root is "/" for this machine, another directory in tests.
func Count(root string) (int, error) {
	dev := filepath.Join(root, "dev")
	entries, err := os.ReadDir(dev)
	if err != nil {
		return 0, fmt.Errorf("count GPUs in %s: %w", dev, err)
	}
	n := 0
	for _, e := range entries {
		if deviceRE.MatchString(e.Name()) {
			n++
		}
	}
	return n, nil
}
