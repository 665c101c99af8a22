package main

import (
	"bytes"
	"context"
	"encoding/json"
	osuser "os/user"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/observe/jobview"
)

// TestYARNAdminUser: spindle status, kill and logs name the user as
// spindle submit does (spindle.hadoop.user, $HADOOP_USER_NAME, the login
// name), never $USER or a made-up name: with USER unset on a cluster with
// ACLs the ResourceManager would refuse, or record the wrong user.
func TestYARNAdminUser(t *testing.T) {
	login, err := osuser.Current()
	if err != nil {
		t.Skipf("no login user here: %v", err)
	}
	for _, tc := range []struct {
		name, configured, hadoopUser, user, want string
	}{
		{"login name", "", "", "", login.Username},
		{"USER is not the login name", "", "", "someone-else", login.Username},
		{"HADOOP_USER_NAME", "", "alice", "", "alice"},
		{"spindle.hadoop.user", "bob", "alice", "", "bob"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("HADOOP_USER_NAME", tc.hadoopUser)
			t.Setenv("USER", tc.user)
			got, err := yarnAdminUser(tc.configured)
			if err != nil || got != tc.want {
				t.Fatalf("yarnAdminUser(%q) = %q, %v; want %q", tc.configured, got, err, tc.want)
			}
		})
	}
}

// TestStatusKillWithoutApplication: status and kill without a YARN
// application id, on YARN or naming no cluster at all, say how to name
// the application, not that a standalone cluster's secret is missing.
func TestStatusKillWithoutApplication(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	t.Setenv("SPINDLE_CLUSTER_SECRET", "")
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"status", "--master", "yarn"}, "spindle status on YARN takes the application id"},
		{[]string{"status"}, "spindle status takes a YARN application id (spindle status application_...) or a standalone cluster's --master"},
		{[]string{"kill", "--master", "yarn", "my-job"}, "spindle kill on YARN takes the application id"},
	} {
		err := newApp().RunContext(context.Background(), append([]string{"spindle"}, tc.args...))
		if err == nil || exitCode(err) != exitUsage || !strings.Contains(err.Error(), tc.want) || strings.Contains(err.Error(), "SECRET") {
			t.Errorf("spindle %v: exit %d: %v; want exit 2 with %q", tc.args, exitCode(err), err, tc.want)
		}
	}
}

// TestQuoteCommand: a rewritten --ps-command reaches a cluster-mode
// driver word for word.
func TestQuoteCommand(t *testing.T) {
	words := []string{"python3", "train_ps.py", "--name", "it's a test", `a"b\c`, ""}
	got, err := driver.SplitCommand(quoteCommand(words))
	if err != nil || strings.Join(got, "|") != strings.Join(words, "|") {
		t.Fatalf("SplitCommand(quoteCommand(%q)) = %q, %v", words, got, err)
	}
}

// TestStatusKillHelpNameYARN: status --help and kill --help describe YARN
// application ids, not standalone clusters alone.
func TestStatusKillHelpNameYARN(t *testing.T) {
	for _, command := range []string{"status", "kill"} {
		app := newApp()
		var out bytes.Buffer
		app.Writer = &out
		if err := app.RunContext(context.Background(), []string{"spindle", command, "--help"}); err != nil {
			t.Fatalf("spindle %s --help: %v", command, err)
		}
		for _, want := range []string{"YARN application", "application_...", "spindle.hadoop.user", "standalone cluster"} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("spindle %s --help does not say %q:\n%s", command, want, out.String())
			}
		}
	}
}

// TestLogsOfYARNAppNamesEventLog: spindle logs of a YARN application it
// cannot follow says that jobs write an event log only when
// spindle.eventLog.dir is set, where to set it, and where YARN keeps the
// containers' output.
func TestLogsOfYARNAppNamesEventLog(t *testing.T) {
	t.Setenv("SPINDLE_CONF_DIR", "")
	t.Setenv("HADOOP_CONF_DIR", "")
	const app = "application_1700000000000_0001"
	err := newApp().RunContext(context.Background(), []string{"spindle", "logs", app})
	for _, want := range []string{"spindle.eventLog.dir: jobs write one only when it is set", "conf/spindle-defaults.conf.template", "yarn logs -applicationId " + app} {
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("spindle logs %s: %v; want it to say %q", app, err, want)
		}
	}
}

// TestStatusShowsLocalizingRanks: spindle status of a running YARN job
// lists each rank still fetching and unpacking its --files and --archives
// with the bytes read so far, from the job's API as its driver serves it,
// and says nothing of the ranks already running.
func TestStatusShowsLocalizingRanks(t *testing.T) {
	served, err := json.Marshal(jobview.Snapshot{Ranks: []jobview.RankView{
		{Rank: 0, Host: "nm1.example.com", State: jobview.RankRunning},
		{Rank: 1, Host: "nm2.example.com", State: jobview.RankLocalizing, Message: "localizing: 1048576 of 31457280 bytes"},
	}})
	if err != nil {
		t.Fatal(err)
	}
	var snap jobview.Snapshot
	if err := json.Unmarshal(served, &snap); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	printLiveJob(&out, snap)
	if want := "rank 1 on nm2.example.com: localizing: 1048576 of 31457280 bytes\n"; out.String() != want {
		t.Fatalf("spindle status printed %q, want %q", out.String(), want)
	}
}
