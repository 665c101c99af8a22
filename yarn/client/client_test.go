package client

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
)

func TestMain(m *testing.M) { os.Exit(hadooptest.Main(m)) }

func TestConfAddrs(t *testing.T) {
	for _, tc := range []struct {
		name  string
		props map[string]string
		rm    []string
		sched []string
		err   string
	}{
		{"defaults from the hostname", map[string]string{"yarn.resourcemanager.hostname": "rm1"},
			[]string{"rm1:8032"}, []string{"rm1:8030"}, ""},
		{"explicit addresses, wildcard host", map[string]string{"yarn.resourcemanager.address": "0.0.0.0:9032", "yarn.resourcemanager.scheduler.address": "rm:9030"},
			[]string{"127.0.0.1:9032"}, []string{"rm:9030"}, ""},
		{"HA pair", map[string]string{
			"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "rm1, rm2",
			"yarn.resourcemanager.hostname.rm1": "a", "yarn.resourcemanager.address.rm2": "b:1",
			"yarn.resourcemanager.scheduler.address.rm2": "b:2"},
			[]string{"a:8032", "b:1"}, []string{"a:8030", "b:2"}, ""},
		{"HA id without an address", map[string]string{"yarn.resourcemanager.ha.enabled": "true", "yarn.resourcemanager.ha.rm-ids": "rm1"},
			nil, nil, "yarn.resourcemanager.hostname.rm1"},
		{"unbound port", map[string]string{"yarn.resourcemanager.address": "localhost:0"}, nil, nil, "yarn.resourcemanager.address"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := ConfFromMap(tc.props)
			rm, err := c.RMAddrs()
			if tc.err != "" {
				if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v, want one naming %s", err, tc.err)
				}
				return
			}
			sched, err2 := c.SchedulerAddrs()
			if err != nil || err2 != nil || strings.Join(rm, ",") != strings.Join(tc.rm, ",") || strings.Join(sched, ",") != strings.Join(tc.sched, ",") {
				t.Fatalf("rm %v sched %v (%v %v)", rm, sched, err, err2)
			}
		})
	}
}

func TestLoadConf(t *testing.T) {
	dir := t.TempDir()
	if _, err := LoadConf(dir); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "yarn-site.xml") {
		t.Fatalf("missing yarn-site.xml: %v", err)
	}
	os.WriteFile(filepath.Join(dir, "core-site.xml"), []byte(`<configuration><property><name>fs.defaultFS</name><value>hdfs://nn:8020</value></property></configuration>`), 0o644)
	os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(`<configuration><property><name>yarn.resourcemanager.hostname</name><value>rm</value></property>
<property><name>yarn.resourcemanager.address</name><value>${yarn.resourcemanager.hostname}:7</value></property></configuration>`), 0o644)
	c, err := LoadConf(dir)
	if err != nil {
		t.Fatal(err)
	}
	if rm, _ := c.RMAddrs(); rm[0] != "rm:7" || c.Get("fs.defaultFS", "") != "hdfs://nn:8020" {
		t.Fatalf("rm %v fs %s", rm, c.Get("fs.defaultFS", ""))
	}
	t.Setenv("HADOOP_CONF_DIR", "")
	if _, err := LoadConf(""); !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), "HADOOP_CONF_DIR") {
		t.Fatalf("unset HADOOP_CONF_DIR: %v", err)
	}
}

func TestIDs(t *testing.T) {
	a, err := ParseAppID("application_1700000000000_0042")
	if err != nil || a.ID != 42 || a.String() != "application_1700000000000_0042" {
		t.Fatalf("%v %v", a, err)
	}
	for _, s := range []string{"container_1700000000000_0042_01_000003", "container_e17_1700000000000_0042_01_000003"} {
		c, err := ParseContainerID(s)
		if err != nil || ContainerString(c) != s || AttemptString(c.GetAppAttemptId()) != "appattempt_1700000000000_0042_000001" {
			t.Fatalf("%s: %v %v", s, c, err)
		}
	}
	if _, err := ParseAppID("app_1_2"); err == nil {
		t.Fatal("bad id parsed")
	}
}

func TestUnreachable(t *testing.T) {
	addr := testaddr.Refusing(t)
	c, err := New(Config{RMAddrs: []string{addr}, User: "u", Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_, err = c.ClusterMetrics(context.Background())
	if !errors.Is(err, ErrUnreachable) || !strings.Contains(err.Error(), addr) {
		t.Fatalf("error %v, want ErrUnreachable naming %s", err, addr)
	}
}

// TestRealResourceManager talks to Apache Hadoop's own ResourceManager.
func TestRealResourceManager(t *testing.T) {
	hc := hadooptest.Shared(t)
	conf, err := LoadConf(hc.ConfDir)
	if err != nil {
		t.Fatal(err)
	}
	rms, err := conf.RMAddrs()
	if err != nil {
		t.Fatal(err)
	}
	// A dead first address is failed over, as a standby would be.
	c, err := New(Config{RMAddrs: append([]string{testaddr.Refusing(t)}, rms...), User: "spindle"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
	defer cancel()
	m, err := c.ClusterMetrics(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if m.GetNumNodeManagers() != 3 {
		t.Fatalf("nodemanagers %d, want 3", m.GetNumNodeManagers())
	}
	id, maxRes, err := c.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if id.ID <= 0 || maxRes.GetMemory() <= 0 {
		t.Fatalf("new application %v, max %v", id, maxRes)
	}
	q, err := c.QueueInfo(ctx, "default")
	if err != nil {
		t.Fatal(err)
	}
	if q.GetQueueName() != "default" || !strings.Contains(QueueRoom(q), "queue default has") {
		t.Fatalf("queue %v: %s", q, QueueRoom(q))
	}
	if _, err := c.Report(ctx, AppID{ClusterTimestamp: id.ClusterTimestamp, ID: id.ID + 1000}); err == nil || !strings.Contains(err.Error(), "ApplicationNotFoundException") {
		t.Fatalf("report of an unknown application: %v", err)
	}
	nodes, err := c.Nodes(ctx)
	if err != nil || len(nodes) != 3 {
		t.Fatalf("nodes %d: %v", len(nodes), err)
	}
}
