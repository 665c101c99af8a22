package driver

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/feed"
	"github.com/spindle-ml/spindle/internal/config"
)

func TestDefaultConfigFollowsKeyTable(t *testing.T) {
	c := DefaultConfig()
	if c.NumExecutors != 2 || c.BatchRows != 1024 || c.MemoryBudget != 256<<20 || c.EvenBatches != feed.EvenPad ||
		c.HeartbeatTimeout != 6*time.Second || c.ListenHost != "127.0.0.1" || c.CSV.Delimiter != 0 || !c.CSV.Header {
		t.Fatalf("DefaultConfig = %+v", c)
	}
}

func TestConfigFromProperties(t *testing.T) {
	load := func(conf ...string) *config.Properties {
		p, _, err := config.Load(config.Sources{Overrides: conf})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	c, m, err := ConfigFromProperties(load("spindle.master=local[3]", "spindle.feed.memoryBudget=64m"))
	if err != nil || m.Kind != MasterLocal || c.NumExecutors != 3 || c.MemoryBudget != 64<<20 {
		t.Fatalf("got %+v %+v %v", c, m, err)
	}
	c, _, err = ConfigFromProperties(load("spindle.master=spindle://m1:7077", "spindle.network.interface=lo"))
	if err != nil || c.ListenHost != "127.0.0.1" || c.AdvertiseHost != "127.0.0.1" {
		t.Fatalf("a cluster driver on interface lo listens on %q and advertises %q (%v)", c.ListenHost, c.AdvertiseHost, err)
	}
	c, _, err = ConfigFromProperties(load("spindle.master=spindle://m1:7077", "spindle.driver.host=gw.example", "spindle.driver.bindHost=0.0.0.0"))
	if err != nil || c.ListenHost != "0.0.0.0" || c.AdvertiseHost != "gw.example" {
		t.Fatalf("listens on %q and advertises %q (%v)", c.ListenHost, c.AdvertiseHost, err)
	}
	if _, _, err = ConfigFromProperties(load("spindle.master=spindle://m1:7077", "spindle.network.interface=nope0")); err == nil ||
		!strings.Contains(err.Error(), "nope0") {
		t.Fatalf("a missing interface: %v", err)
	}
	for conf, want := range map[string]string{
		"spindle.input.csv.delimiter=;;": "must be one character",
		"spindle.master=mesos://x":       "unknown master URL",
		"spindle.executor.instances=4":   "disagree on the number of executors",
	} {
		overrides := []string{conf}
		if strings.HasPrefix(conf, "spindle.executor") {
			overrides = append(overrides, "spindle.master=local[2]")
		}
		if _, _, err := ConfigFromProperties(load(overrides...)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err = %v, want %q", conf, err, want)
		}
	}
}

// TestExecutorCountPrecedence: local[N] and spindle.executor.instances
// resolve by the precedence of their sources, and disagree only when
// given at the same level.
func TestExecutorCountPrecedence(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, config.DefaultsFileName), []byte("spindle.master local[3]\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name    string
		src     config.Sources
		want    int
		wantErr string
	}{
		{"flag beats the defaults file", config.Sources{ConfDir: dir,
			Flags: []config.Setting{{Key: config.KeyExecutorInstances, Value: "2", Source: "--num-executors"}}}, 2, ""},
		{"conf beats the defaults file", config.Sources{ConfDir: dir, Overrides: []string{"spindle.executor.instances=5"}}, 5, ""},
		{"local[N] alone", config.Sources{ConfDir: dir}, 3, ""},
		{"flag master beats conf count", config.Sources{Overrides: []string{"spindle.executor.instances=5"},
			Flags: []config.Setting{{Key: config.KeyMaster, Value: "local[4]", Source: "--master"}}}, 4, ""},
		{"both flags agree", config.Sources{Flags: []config.Setting{
			{Key: config.KeyMaster, Value: "local[4]", Source: "--master"},
			{Key: config.KeyExecutorInstances, Value: "4", Source: "--num-executors"}}}, 4, ""},
		{"both flags disagree", config.Sources{Flags: []config.Setting{
			{Key: config.KeyMaster, Value: "local[4]", Source: "--master"},
			{Key: config.KeyExecutorInstances, Value: "2", Source: "--num-executors"}}}, 0, "--master local[4] and --num-executors 2 disagree"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, _, err := config.Load(tc.src)
			if err != nil {
				t.Fatal(err)
			}
			c, _, err := ConfigFromProperties(p)
			if tc.wantErr != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v, want ErrConfig with %q", err, tc.wantErr)
				}
				return
			}
			if err != nil || c.NumExecutors != tc.want {
				t.Fatalf("executors = %d (%v), want %d", c.NumExecutors, err, tc.want)
			}
		})
	}
}
