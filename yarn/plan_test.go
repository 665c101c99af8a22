package yarn

import (
	"bytes"
	"os/exec"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

func TestPlanTravelsInCredentials(t *testing.T) {
	p := Plan{AppID: "application_1_0001", SchedulerAddrs: []string{"rm:8030"}, Env: map[string]string{"SPINDLE_JOB_SECRET": "s3cret"}, AMSecret: "am"}
	c := hadooprpc.NewCredentials()
	if err := p.addTo(c); err != nil {
		t.Fatal(err)
	}
	b, err := c.Marshal(hadooprpc.CredentialsWritable)
	if err != nil {
		t.Fatal(err)
	}
	back, err := hadooprpc.ReadCredentials(bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	got, err := planFrom(back)
	if err != nil || got.Env["SPINDLE_JOB_SECRET"] != "s3cret" || got.SchedulerAddrs[0] != "rm:8030" {
		t.Fatalf("plan %+v %v", got, err)
	}
	if _, err := planFrom(hadooprpc.NewCredentials()); err == nil || !strings.Contains(err.Error(), planAlias) {
		t.Fatalf("no plan: %v", err)
	}
}

// TestSecretsStayOutOfLaunchContexts: the job secret is in an executor's
// credentials, not in its environment or command line, which YARN writes
// into launch scripts and shows in its UI.
func TestSecretsStayOutOfLaunchContexts(t *testing.T) {
	plan := Plan{Spindle: Resource{Scheme: "hdfs", Host: "nn", Port: 8020, File: "/s/spindle", Size: 10, Timestamp: 5}}
	build := executorLaunchContext(plan, nil)
	clc, err := build(driverSpec("exec-0", map[string]string{"SPINDLE_JOB_SECRET": "s3cret"}, "executor", "--driver", "h:1", "--id", "it's"))
	if err != nil {
		t.Fatal(err)
	}
	for _, kv := range clc.GetEnvironment() {
		if strings.Contains(kv.GetValue(), "s3cret") {
			t.Fatalf("secret in the environment: %s", kv.GetKey())
		}
	}
	cmd := strings.Join(clc.GetCommand(), " ")
	if strings.Contains(cmd, "s3cret") {
		t.Fatalf("secret on the command line: %s", cmd)
	}
	creds, err := hadooprpc.ReadCredentials(bytes.NewReader(clc.GetTokens()))
	if err != nil || string(creds.Secrets[envAliasPrefix+"SPINDLE_JOB_SECRET"]) != "s3cret" {
		t.Fatalf("credentials %+v %v", creds, err)
	}
	lr := clc.GetLocalResources()[0]
	if lr.GetKey() != "spindle" || lr.GetValue().GetSize() != 10 || lr.GetValue().GetTimestamp() != 5 || lr.GetValue().GetResource().GetFile() != "/s/spindle" {
		t.Fatalf("local resource %v", lr)
	}
	// The command survives bash, quotes and all.
	line := strings.TrimSuffix(strings.TrimPrefix(cmd, "./spindle yarn-container -- "), " 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr")
	out, err := exec.Command("bash", "-c", "printf '%s|' "+line).Output()
	if err != nil || string(out) != "executor|--driver|h:1|--id|it's|" {
		t.Fatalf("bash read %q (%v)", out, err)
	}
}

func TestStripEnv(t *testing.T) {
	got := stripEnv(map[string]string{"A": "1", "B": "2", "C": "3"}, map[string]string{"A": "1", "B": "other"})
	if len(got) != 2 || got["B"] != "2" || got["C"] != "3" {
		t.Fatalf("stripped %v", got)
	}
}

func driverSpec(id string, env map[string]string, args ...string) driver.ExecutorSpec {
	return driver.ExecutorSpec{ID: id, Env: env, Args: args, MemoryMB: 256, Cores: 1}
}

// TestClusterJobInCredentials: a cluster-mode job's settings, environment
// and files reach the ApplicationMaster in its credentials only; its
// environment and command line (written into a launch script, shown in
// YARN's UI) carry none of them.
func TestClusterJobInCredentials(t *testing.T) {
	job := &ClusterJob{
		Settings: []string{"spindle.flight.token=tok-s3cret", "spindle.executor.instances=4"},
		Inputs:   []string{"hdfs:///data/*.parquet"},
		Command:  []string{"python3", "train.py"},
		Env:      map[string]string{"API_KEY": "env-s3cret"},
		Files:    []string{"hdfs://nn:8020/user/u/.spindleStaging/app/files/0/train.py"},
	}
	conf := Resource{Scheme: "hdfs", Host: "nn", Port: 8020, File: "/s/conf/core-site.xml", Size: 3, Timestamp: 7}
	plan := Plan{AppID: "application_1_0003", AMSecret: "am-s3cret", Cluster: job,
		Spindle: Resource{Scheme: "hdfs", Host: "nn", Port: 8020, File: "/s/spindle", Size: 10, Timestamp: 5},
		AMFiles: map[string]Resource{amConfPrefix + "core-site.xml": conf}}
	clc, err := amLaunchContext(plan, "info", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	visible := strings.Join(clc.GetCommand(), " ")
	for _, kv := range clc.GetEnvironment() {
		visible += " " + kv.GetKey() + "=" + kv.GetValue()
	}
	for _, secret := range []string{"tok-s3cret", "env-s3cret", "am-s3cret", "train.py"} {
		if strings.Contains(visible, secret) {
			t.Errorf("%q is in the AM's environment or command line: %s", secret, visible)
		}
	}
	creds, err := hadooprpc.ReadCredentials(bytes.NewReader(clc.GetTokens()))
	if err != nil {
		t.Fatal(err)
	}
	got, err := planFrom(creds)
	if err != nil || got.Cluster == nil || got.AMSecret != "am-s3cret" || got.Cluster.Env["API_KEY"] != "env-s3cret" ||
		strings.Join(got.Cluster.Settings, " ") != strings.Join(job.Settings, " ") || got.Cluster.Files[0] != job.Files[0] {
		t.Fatalf("plan from the credentials: %+v %v", got, err)
	}
	names := map[string]bool{}
	for _, lr := range clc.GetLocalResources() {
		names[lr.GetKey()] = true
	}
	if !names["spindle"] || !names[amConfPrefix+"core-site.xml"] {
		t.Fatalf("local resources %v", names)
	}
}
