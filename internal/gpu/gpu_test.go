package gpu

import (
	"os"
	"path/filepath"
	"testing"
)

func TestCount(t *testing.T) {
	for _, tc := range []struct {
		name  string
		nodes []string
		want  int
	}{
		{"none", nil, 0},
		{"control nodes only", []string{"nvidiactl", "nvidia-uvm", "nvidia-modeset"}, 0},
		{"two GPUs", []string{"nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm", "null"}, 2},
		{"many", []string{"nvidia0", "nvidia1", "nvidia2", "nvidia10"}, 4},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			dev := filepath.Join(root, "dev")
			if err := os.Mkdir(dev, 0o755); err != nil {
				t.Fatal(err)
			}
			for _, n := range tc.nodes {
				if err := os.WriteFile(filepath.Join(dev, n), nil, 0o644); err != nil {
					t.Fatal(err)
				}
			}
			got, err := Count(root)
			if err != nil || got != tc.want {
				t.Fatalf("Count = %d, %v; want %d", got, err, tc.want)
			}
		})
	}
	if _, err := Count(filepath.Join(t.TempDir(), "nope")); err == nil {
		t.Error("a root without /dev counted without error")
	}
}
