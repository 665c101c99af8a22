package yarntest_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/yarntest"
	"github.com/spindle-ml/spindle/yarn/am"
	"github.com/spindle-ml/spindle/yarn/client"
)

func rmClient(t *testing.T, c *yarntest.Cluster) *client.Client {
	t.Helper()
	cl, err := client.New(client.Config{RMAddrs: []string{c.Addr()}, User: "tester", Rounds: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close() })
	return cl
}

// submit submits an application whose AM is a shell command.
func submit(t *testing.T, rm *client.Client, queue string, maxAttempts int32, command string) client.AppID {
	t.Helper()
	ctx := context.Background()
	id, maxCap, err := rm.NewApplication(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if maxCap.GetMemory() <= 0 {
		t.Fatalf("maximum capability %v", maxCap)
	}
	sc := &pb.ApplicationSubmissionContextProto{
		ApplicationId: id.Proto(), ApplicationName: proto.String("probe"), Queue: proto.String(queue),
		AmContainerSpec: &pb.ContainerLaunchContextProto{Command: []string{command},
			Environment: []*pb.StringStringMapProto{{Key: proto.String("PROBE"), Value: proto.String("{{USER}}")}}},
		MaxAppAttempts:  proto.Int32(maxAttempts),
		Resource:        &pb.ResourceProto{Memory: proto.Int64(256), VirtualCores: proto.Int32(1)},
		ApplicationType: proto.String("SPINDLE"), ApplicationTags: []string{"t"},
	}
	if err := rm.Submit(ctx, sc); err != nil {
		t.Fatal(err)
	}
	return id
}

// amHarness is an application whose AM container hands its credentials to
// the test, which then acts as the ApplicationMaster with Spindle's real
// allocator.
type amHarness struct {
	c     *yarntest.Cluster
	rm    *client.Client
	id    client.AppID
	dir   string
	creds *hadooprpc.Credentials
}

func startApp(t *testing.T, c *yarntest.Cluster, queue string) *amHarness {
	t.Helper()
	h := &amHarness{c: c, rm: rmClient(t, c), dir: t.TempDir()}
	h.id = submit(t, h.rm, queue, 1, fmt.Sprintf(`cp "$HADOOP_TOKEN_FILE_LOCATION" %[1]s/tokens.tmp && env > %[1]s/env && mv %[1]s/tokens.tmp %[1]s/tokens && exec sleep 300`, h.dir))
	testutil.WaitFor(t, 20*time.Second, testutil.Holds("AM credentials", func() bool {
		_, err := os.Stat(filepath.Join(h.dir, "tokens"))
		return err == nil
	}))

	creds, err := hadooprpc.ReadCredentialsFile(filepath.Join(h.dir, "tokens"))
	if err != nil {
		t.Fatal(err)
	}
	h.creds = creds
	return h
}

func (h *amHarness) token(t *testing.T) hadooprpc.Token {
	t.Helper()
	tok, ok := h.creds.TokenOfKind(am.AMRMTokenKind)
	if !ok {
		t.Fatalf("the AM's credentials hold no %s: %v", am.AMRMTokenKind, h.creds.Tokens)
	}
	return tok
}

func (h *amHarness) startAM(t *testing.T, gang time.Duration) (*am.Allocator, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(20*time.Second))
	defer cancel()
	a, err := am.Start(ctx, am.Config{
		SchedulerAddrs: []string{h.c.SchedulerAddr()}, AMRMToken: h.token(t), Host: "127.0.0.1", Port: 4040,
		MemoryOverheadMB: 128, GangTimeout: gang, HeartbeatInterval: 100 * time.Millisecond,
		LaunchContext: func(spec driver.ExecutorSpec) (*pb.ContainerLaunchContextProto, error) {
			return &pb.ContainerLaunchContextProto{
				Command:     []string{"exec sleep 300 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr"},
				Environment: []*pb.StringStringMapProto{{Key: proto.String("SPINDLE_EXECUTOR_ID"), Value: proto.String(spec.ID)}},
			}, nil
		},
	})
	if err == nil {
		t.Cleanup(func() {
			fctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
			defer cancel()
			a.Finish(fctx, pb.FinalApplicationStatusProto_APP_SUCCEEDED, "")
			a.Close()
		})
	}
	return a, err
}

func specs(n int) []driver.ExecutorSpec {
	out := make([]driver.ExecutorSpec, n)
	for i := range out {
		out[i] = driver.ExecutorSpec{ID: fmt.Sprintf("exec-%d", i), MemoryMB: 256, Cores: 1}
	}
	return out
}

// containerOf finds the running container of an executor.
func containerOf(t *testing.T, c *yarntest.Cluster, exec string) yarntest.ContainerInfo {
	t.Helper()
	var info yarntest.ContainerInfo
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("running container of "+exec, func() bool {
		for _, ct := range c.Containers() {
			if ct.ExecutorID == exec && ct.Running {
				info = ct
				return true
			}
		}
		return false
	}))

	return info
}

// nextEnd reads the allocator's events until exec's container ends.
func nextEnd(t *testing.T, a *am.Allocator, exec string) driver.Event {
	t.Helper()
	timeout := time.After(testutil.Scale(20 * time.Second))
	for {
		select {
		case ev := <-a.Events():
			if ev.ExecutorID == exec && ev.Kind != driver.ExecutorStarted {
				return ev
			}
		case <-timeout:
			t.Fatalf("no end of executor %s reported to the AM", exec)
		}
	}
}

// TestApplicationLifecycle runs an application through the client
// protocol: its AM container gets YARN's environment and an AMRMToken, the
// report follows it from ACCEPTED to RUNNING (once the AM registers) to
// FINISHED with the AM's final status, and unknown ids are refused.
func TestApplicationLifecycle(t *testing.T) {
	t.Parallel()
	c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 2})
	h := startApp(t, c, "default")
	env, _ := os.ReadFile(filepath.Join(h.dir, "env"))
	for _, want := range []string{"CONTAINER_ID=container_", "NM_HOST=127.0.0.1", "LOCAL_DIRS=", "LOG_DIRS=", "HADOOP_TOKEN_FILE_LOCATION=", "PROBE=" + os.Getenv("USER")} {
		if !strings.Contains(string(env), want) && !(strings.HasPrefix(want, "PROBE=") && os.Getenv("USER") == "") {
			t.Errorf("AM environment lacks %q:\n%s", want, env)
		}
	}
	ctx := context.Background()
	rep, err := h.rm.Report(ctx, h.id)
	if err != nil || rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_ACCEPTED || rep.GetHost() != "N/A" {
		t.Fatalf("before registration: %v %q (%v)", rep.GetYarnApplicationState(), rep.GetHost(), err)
	}
	a, err := h.startAM(t, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rep, _ = h.rm.Report(ctx, h.id)
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_RUNNING || rep.GetHost() != "127.0.0.1" || rep.GetRpcPort() != 4040 ||
		rep.GetApplicationType() != "SPINDLE" || rep.GetName() != "probe" || rep.GetQueue() != "default" || rep.GetUser() != "tester" {
		t.Fatalf("after registration: %v", rep)
	}
	if err := a.Request(ctx, specs(3)); err != nil {
		t.Fatal(err)
	}
	nodes := map[int]bool{}
	for _, ct := range c.Containers() {
		if !ct.AM {
			nodes[ct.Node] = true
		}
	}
	if len(nodes) != 2 {
		t.Errorf("3 executors on %d nodes, want spread over both", len(nodes))
	}
	if err := a.Finish(ctx, pb.FinalApplicationStatusProto_APP_SUCCEEDED, "all done"); err != nil {
		t.Fatal(err)
	}
	rep, _ = h.rm.Report(ctx, h.id)
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_FINISHED || rep.GetFinalApplicationStatus() != pb.FinalApplicationStatusProto_APP_SUCCEEDED || rep.GetDiagnostics() != "all done" {
		t.Fatalf("after finish: %v %v %q", rep.GetYarnApplicationState(), rep.GetFinalApplicationStatus(), rep.GetDiagnostics())
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("executor containers stopped", func() bool {
		for _, ct := range c.Containers() {
			if !ct.AM && ct.Running {
				return false
			}
		}
		return true
	}))

	if _, err := h.rm.Report(ctx, client.AppID{ClusterTimestamp: 1, ID: 99}); hadooprpc.ExceptionClass(err) != "org.apache.hadoop.yarn.exceptions.ApplicationNotFoundException" {
		t.Errorf("unknown application: %v", err)
	}
}

// TestAMFailure: an AM that exits before unregistering fails its attempt;
// with attempts left YARN starts another, then fails the application with
// the AM's stderr in the diagnostics.
func TestAMFailure(t *testing.T) {
	t.Parallel()
	c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
	rm := rmClient(t, c)
	id := submit(t, rm, "default", 2, "{ echo cannot reach the driver >&2; exit 3; } 1><LOG_DIR>/stdout 2><LOG_DIR>/stderr")
	var rep *pb.ApplicationReportProto
	testutil.WaitFor(t, 20*time.Second, testutil.Holds("application failed", func() bool {
		r, err := rm.Report(context.Background(), id)
		rep = r
		return err == nil && client.IsFinal(r.GetYarnApplicationState())
	}))

	d := rep.GetDiagnostics()
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_FAILED || !strings.Contains(d, "failed 2 times") ||
		!strings.Contains(d, "exitCode: 3") || !strings.Contains(d, "cannot reach the driver") {
		t.Fatalf("%v: %s", rep.GetYarnApplicationState(), d)
	}
	if rep.GetCurrentApplicationAttemptId().GetAttemptId() != 2 {
		t.Errorf("attempt %d, want 2", rep.GetCurrentApplicationAttemptId().GetAttemptId())
	}
}

// TestForceKill: forceKillApplication ends the application KILLED and
// stops its AM.
func TestForceKill(t *testing.T) {
	t.Parallel()
	c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
	h := startApp(t, c, "default")
	done, err := h.rm.Kill(context.Background(), h.id, "test")
	if err != nil || !done {
		t.Fatalf("kill: %v %v", done, err)
	}
	rep, _ := h.rm.Report(context.Background(), h.id)
	if rep.GetYarnApplicationState() != pb.YarnApplicationStateProto_KILLED || !strings.Contains(rep.GetDiagnostics(), "killed by user tester") {
		t.Fatalf("%v %q", rep.GetYarnApplicationState(), rep.GetDiagnostics())
	}
	testutil.WaitFor(t, 10*time.Second, testutil.Holds("AM stopped", func() bool {
		for _, ct := range c.Containers() {
			if ct.Running {
				return false
			}
		}
		return true
	}))

}

// TestContainerEnds ends an executor's container in each way YARN can and
// checks what Spindle's ApplicationMaster makes of it: the event kind, the
// exit status, and a message naming the executor, the container and the
// reason.
func TestContainerEnds(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name  string
		fault func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error
		kind  driver.EventKind
		code  int
		want  []string
	}{
		{"preempted", func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error { return c.Preempt(ct.ID) },
			driver.ExecutorLost, am.ExitPreempted, []string{"preempted by YARN"}},
		{"physical memory", func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error { return c.KillForMemory(ct.ID, true) },
			driver.ExecutorExited, am.ExitKilledPMem, []string{"physical memory limit of 384 MiB", "128 MiB overhead", "beyond the 'PHYSICAL' memory limit"}},
		{"virtual memory", func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error { return c.KillForMemory(ct.ID, false) },
			driver.ExecutorExited, am.ExitKilledVMem, []string{"virtual memory limit of 384 MiB"}},
		{"disks failed", func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error { return c.FailDisks(ct.Node) },
			driver.ExecutorLost, am.ExitDisksFailed, []string{"disks of node", "local-dirs have errors"}},
		{"node lost", func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error { return c.LoseNode(ct.Node) },
			driver.ExecutorLost, am.ExitAborted, []string{"aborted by YARN", "*lost* node"}},
		{"killed behind YARN's back", func(c *yarntest.Cluster, ct yarntest.ContainerInfo) error { return c.KillContainer(ct.ID) },
			driver.ExecutorExited, 137, []string{"exited with status 137"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// The AM runs on node 0; the first executor lands on the
			// emptier node 1.
			c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 2})
			h := startApp(t, c, "default")
			a, err := h.startAM(t, 10*time.Second)
			if err != nil {
				t.Fatal(err)
			}
			if err := a.Request(context.Background(), specs(2)); err != nil {
				t.Fatal(err)
			}
			ct := containerOf(t, c, "exec-0")
			if ct.Node != 1 {
				t.Fatalf("executor on node %d, want 1", ct.Node)
			}
			if err := tc.fault(c, ct); err != nil {
				t.Fatal(err)
			}
			ev := nextEnd(t, a, "exec-0")
			if ev.Kind != tc.kind || ev.ExitCode != tc.code {
				t.Errorf("event %v with exit code %d, want %v %d: %s", ev.Kind, ev.ExitCode, tc.kind, tc.code, ev.Message)
			}
			for _, want := range append(tc.want, "exec-0", ct.ID) {
				if !strings.Contains(ev.Message, want) {
					t.Errorf("message lacks %q: %s", want, ev.Message)
				}
			}
		})
	}
}

// TestQueueWithoutRoom: a queue that never has room for the gang makes the
// AM's gang time out, release everything and say what was missing; the
// queue's statistics explain why.
func TestQueueWithoutRoom(t *testing.T) {
	t.Parallel()
	c := yarntest.NewTestCluster(t, yarntest.Config{Queues: []yarntest.QueueConfig{{Name: "ml", MemoryMB: 512}}})
	h := startApp(t, c, "ml")
	a, err := h.startAM(t, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	err = a.Request(context.Background(), specs(2))
	if !errors.Is(err, am.ErrGangTimeout) || !strings.Contains(err.Error(), "granted 0 of 2") || !strings.Contains(err.Error(), "missing 2 more of 384 MiB, 1 vcores") {
		t.Fatalf("request: %v", err)
	}
	q, err := h.rm.QueueInfo(context.Background(), "ml")
	if err != nil {
		t.Fatal(err)
	}
	if room := client.QueueRoom(q); !strings.Contains(room, "queue ml has 256 MiB") {
		t.Errorf("queue room: %s", room)
	}
	for _, ct := range c.Containers() {
		if !ct.AM {
			t.Errorf("container %s allocated in a queue without room", ct.ID)
		}
	}
	// Room appears: the next gang gets it.
	if err := c.SetQueueLimit("ml", 0, 0); err != nil {
		t.Fatal(err)
	}
	if err := a.Request(context.Background(), specs(2)); err != nil {
		t.Fatalf("after the queue grew: %v", err)
	}
}

// TestTokens: the scheduler and the NodeManagers take only the tokens the
// ResourceManager signed with a live key, and say which one they refused.
func TestTokens(t *testing.T) {
	t.Parallel()
	t.Run("wrong AMRMToken", func(t *testing.T) {
		c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
		c.WrongTokens(yarntest.AMRMTokens, true)
		h := startApp(t, c, "default")
		_, err := h.startAM(t, time.Second)
		if !errors.Is(err, hadooprpc.ErrTokenRejected) && !strings.Contains(fmt.Sprint(err), "token rejected") {
			t.Fatalf("register with a wrong token: %v", err)
		}
		if !strings.Contains(err.Error(), c.SchedulerAddr()) || !strings.Contains(err.Error(), "appattempt_") {
			t.Errorf("refusal does not name the scheduler and the attempt: %v", err)
		}
	})
	t.Run("wrong NMToken", func(t *testing.T) {
		c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
		h := startApp(t, c, "default")
		a, err := h.startAM(t, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.WrongTokens(yarntest.NMTokens, true)
		err = a.Request(context.Background(), specs(1))
		if !errors.Is(err, am.ErrLaunch) || !strings.Contains(err.Error(), c.Nodes()[0].Addr) || !strings.Contains(err.Error(), "exec-0") || !strings.Contains(err.Error(), "token") {
			t.Fatalf("start with a wrong NMToken: %v", err)
		}
	})
	t.Run("expired AMRMToken", func(t *testing.T) {
		c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
		h := startApp(t, c, "default")
		c.RollMasterKeys()
		c.ExpireOldKeys()
		_, err := h.startAM(t, time.Second)
		if err == nil || !strings.Contains(err.Error(), "Invalid AMRMToken from appattempt_") || !strings.Contains(err.Error(), "expired") {
			t.Fatalf("register with an expired token: %v", err)
		}
	})
	t.Run("rolled tokens honoured", func(t *testing.T) {
		c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
		h := startApp(t, c, "default")
		a, err := h.startAM(t, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		if err := a.Request(context.Background(), specs(1)); err != nil {
			t.Fatal(err)
		}
		c.RollMasterKeys()
		calls := a.AllocateCalls()
		testutil.WaitFor(t, 10*time.Second, testutil.Holds("allocate after the roll", func() bool { return a.AllocateCalls() >= calls+2 }))
		c.ExpireOldKeys()
		// The AM reconnects with the rolled AMRMToken and starts new
		// containers with the rolled NMToken.
		more := []driver.ExecutorSpec{{ID: "exec-9", MemoryMB: 256, Cores: 1}}
		if err := a.Request(context.Background(), more); err != nil {
			t.Fatalf("after the keys rolled and the old ones expired: %v", err)
		}
		if a.Err() != nil {
			t.Fatal(a.Err())
		}
	})
	t.Run("simple authentication on the scheduler", func(t *testing.T) {
		c := yarntest.NewTestCluster(t, yarntest.Config{NodeManagers: 1})
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(10*time.Second))
		defer cancel()
		cl, err := hadooprpc.Dial(ctx, hadooprpc.ClientConfig{Addr: c.SchedulerAddr(), Protocol: am.ProtocolName, User: "mallory"})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		err = cl.Call(ctx, "registerApplicationMaster", &pb.RegisterApplicationMasterRequestProto{}, &pb.RegisterApplicationMasterResponseProto{})
		if hadooprpc.ExceptionClass(err) != hadooprpc.ClassAccessControl || !strings.Contains(err.Error(), "TOKEN") {
			t.Fatalf("simple register: %v", err)
		}
	})
}
