package sysfstest

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Unpack unpacks the archive at path into a new temporary directory of t
// and returns the directory, the root a sysfs reader is given.
func Unpack(t testing.TB, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	root := t.TempDir()
	var file string
	var body strings.Builder
	flush := func() {
		if file == "" {
			return
		}
		name, target, link := strings.Cut(file, " -> ")
		full := filepath.Join(root, name)
		if err := os.MkdirAll(filepath.Dir(full), 0o755); err != nil {
			t.Fatal(err)
		}
		if link {
			// The target may not exist yet: sysfs links point into
			// /sys/devices, written later.
			if err := os.Symlink(target, full); err != nil {
				t.Fatal(err)
			}
		} else if err := os.WriteFile(full, []byte(body.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		body.Reset()
	}
	for _, line := range strings.SplitAfter(string(data), "\n") {
		if name, ok := strings.CutPrefix(strings.TrimSuffix(line, "\n"), "-- "); ok && strings.HasSuffix(name, " --") {
			flush()
			file = strings.TrimSuffix(name, " --")
			continue
		}
		if file != "" {
			body.WriteString(line)
		}
	}
	flush()
	return root
}
