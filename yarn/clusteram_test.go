package yarn

import (
	"bytes"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLinkConfDir: the Hadoop configuration files YARN localized into the
// AM's working directory become one HADOOP_CONF_DIR for the driver.
func TestLinkConfDir(t *testing.T) {
	wd := t.TempDir()
	t.Chdir(wd)
	os.WriteFile(filepath.Join(wd, amConfPrefix+"core-site.xml"), []byte("<configuration/>"), 0o644)
	os.WriteFile(filepath.Join(wd, "spindle"), []byte("binary"), 0o755)
	dir, err := linkConfDir(map[string]Resource{amConfPrefix + "core-site.xml": {}, "spindle": {}})
	if err != nil {
		t.Fatal(err)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "core-site.xml")); err != nil || string(b) != "<configuration/>" {
		t.Fatalf("core-site.xml in %s: %q %v", dir, b, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "spindle")); err == nil {
		t.Fatal("the binary was linked as configuration")
	}
	if again, err := linkConfDir(map[string]Resource{amConfPrefix + "core-site.xml": {}}); err != nil || again != dir {
		t.Fatalf("second call: %s %v", again, err)
	}
}

// TestTeeLogger: the AM's log lines reach the gateway's stream at the
// AM's level, and still go to the container's log.
func TestTeeLogger(t *testing.T) {
	var container, gateway bytes.Buffer
	base := slog.New(slog.NewTextHandler(&container, &slog.HandlerOptions{Level: slog.LevelInfo}))
	log := teeLogger(base, &gateway).With("component", "yarn-am")
	log.Debug("hidden")
	log.Info("gang granted", "on_input_nodes", 3)
	for name, out := range map[string]string{"container": container.String(), "gateway": gateway.String()} {
		if !strings.Contains(out, "gang granted") || !strings.Contains(out, "component=yarn-am") || !strings.Contains(out, "on_input_nodes=3") || strings.Contains(out, "hidden") {
			t.Errorf("%s log: %q", name, out)
		}
	}
}
