package yarntest_test

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/tokenkeeper"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
	"github.com/spindle-ml/spindle/testbed/yarntest"
)

// secureSite is a Kerberized test HDFS, whose delegation tokens must be
// renewed every renew and live at most max, and a test YARN whose
// ResourceManager takes Kerberos on its client port, with a real MIT KDC.
// The test process holds alice's ticket (KRB5CCNAME), with which the
// NodeManagers localize the staged binary; containers get no ticket.
type secureSite struct {
	*site
	keytab string // alice's
}

func startSecureSite(t *testing.T, renew, max time.Duration) *secureSite {
	t.Helper()
	return startSecureSiteDropping(t, renew, max, nil)
}

// startSecureSiteDropping starts a secure site whose containers do not
// inherit the variables of drop.
func startSecureSiteDropping(t *testing.T, renew, max time.Duration, drop []string) *secureSite {
	t.Helper()
	binaries(t)
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv(hadooprpc.EnvTokenFile, "")
	nnKT, rmKT := kdc.AddServiceKeytab("nn/127.0.0.1"), kdc.AddServiceKeytab("rm/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	t.Setenv("KRB5CCNAME", kdc.Kinit("alice", aliceKT))

	s := &site{confDir: t.TempDir()}
	s.hdfs = hdfstest.NewTestCluster(t, hdfstest.Config{
		DataNodes: 2, BlockSize: 8 << 20, Superuser: "alice",
		SASL:              hadooprpc.KerberosServer{Keytab: nnKT, Protocol: "nn", ServerID: "127.0.0.1"},
		KerberosPrincipal: "nn/_HOST@" + krbtest.Realm, TokenRenewInterval: renew, TokenMaxLifetime: max,
	})
	if err := s.hdfs.WriteConfig(s.confDir); err != nil {
		t.Fatal(err)
	}
	// Clients open a new namenode connection, which authenticates again,
	// for a call 1 ms after the one before (Hadoop's default is 10 s): a
	// job of a few seconds meets its tokens' deadlines as one of days
	// reading large files would.
	addSiteProps(t, filepath.Join(s.confDir, "core-site.xml"), map[string]string{"ipc.client.connection.maxidletime": "1"})
	s.yarn = yarntest.NewTestCluster(t, yarntest.Config{
		NodeManagers: 2, HadoopConfDir: s.confDir,
		ClientSASL: hadooprpc.KerberosServer{Keytab: rmKT, Protocol: "rm", ServerID: "127.0.0.1"},
		Principal:  "rm/_HOST@" + krbtest.Realm,
		DropEnv:    drop,
	})
	if err := s.yarn.WriteConfig(s.confDir); err != nil {
		t.Fatal(err)
	}
	return &secureSite{site: s, keytab: aliceKT}
}

// addSiteProps adds properties to a site file.
func addSiteProps(t *testing.T, path string, props map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var add strings.Builder
	for k, v := range props {
		fmt.Fprintf(&add, "<property><name>%s</name><value>%s</value></property>\n", k, v)
	}
	b = bytes.Replace(b, []byte("</configuration>"), []byte(add.String()+"</configuration>"), 1)
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// secureJobEpochs submits a job with alice's keytab whose training
// process (feedcheck) takes epochs of its input, read from the secure
// HDFS every epoch (no feed cache), sleeping tokenBatchDelay per batch.
func (s *secureSite) secureJobEpochs(t *testing.T, input string, executors, epochs int, extra ...string) *job {
	args := []string{"--principal", "alice", "--keytab", s.keytab,
		"--conf", "spindle.executor.heartbeatInterval=200ms", "--conf", "spindle.executor.heartbeatTimeout=" + testutil.Scale(5*time.Second).String(),
		"--conf", "spindle.feed.cacheMemory=0", "--conf", "spindle.log.level=debug",
		"--num-executors", strconv.Itoa(executors), "--executor-memory", "256m"}
	args = append(args, extra...)
	args = append(args, "--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "64",
		"--epochs", strconv.Itoa(epochs), "--seed", "3", "--", feedcheckBin, "--batch-delay", tokenBatchDelay.String())
	return s.submit(t, args...)
}

var tokenSeqRE = regexp.MustCompile(`token (\d+) for alice`)

// The secure tests' delegation tokens must be renewed every renew (5 s,
// scaled) and live at most max (twice that): tokenTimes. The test
// ResourceManager does not renew the tokens of a launch context, as
// YARN's DelegationTokenRenewer would, so
// the gateway's launch token lives only until its first renewal deadline:
// renew must cover the time from the token's issue to the
// NodeManager localizing the ApplicationMaster's binary with it, and the
// driver's renewals, due at three quarters of it, must not fall behind.
// At 1 s, a loaded machine missed both (the AM's container could not
// localize spindle: the namenode refused the delegation token). Jobs that
// must outlive two fresh generations (one comes at three quarters of
// max) take epochsPast2Max epochs of putData's 3,000 rows on two
// ranks. Their training process sleeps per batch, so a job lasts as long
// on a fast machine as on a loaded one and spends little CPU: it once
// trained logreg for 1,500 epochs: about 14 s idle, 50 s at a load of 60.
//
// They are scaled as each test starts (newTokenTimes), at the load then
// (scaled when the binary started, before a second make test loaded the
// machine, they were too short), and renew leaves the driver's fresh
// generation, due at three quarters of max, a quarter of max (2.5 s and
// more) to log in again from the keytab and reach the executors while
// the load rises during the job.
const tokenBatchDelay = 25 * time.Millisecond

type tokenTimes struct {
	renew, max     time.Duration
	epochsPast2Max int
}

func newTokenTimes() tokenTimes {
	renew := testutil.Scale(5 * time.Second)
	max := 2 * renew
	return tokenTimes{renew: renew, max: max, epochsPast2Max: testutil.PacedEpochs(2*max+renew, 3000/2, 64, tokenBatchDelay)}
}

// TestSecureTokenRenewal: on a Kerberized test YARN and HDFS whose
// delegation tokens must be renewed every few seconds and live twice that
// at most (tokenTimes), the Go example runs for several times that with executors that
// have no ticket: the driver renews the executors' tokens, logs in again
// from the keytab and sends fresh ones to the running executors, which
// rewrite their containers' credentials files and open new namenode
// connections with them; replaced tokens are cancelled. With
// spindle.security.tokens.renew=false the same job fails, exit 1, with an error that names the expired token.
func TestSecureTokenRenewal(t *testing.T) {
	tt := newTokenTimes()
	s := startSecureSite(t, tt.renew, tt.max)
	input := s.putData(t)

	t.Run("renewed", func(t *testing.T) {
		start := time.Now()
		// Long enough for two fresh generations of 10 s tokens (one comes
		// at 7.5 s).
		j := s.secureJobEpochs(t, input, 2, tt.epochsPast2Max)
		code := j.wait(t, 3*time.Minute)
		logs := j.stderr.String()
		if code != 0 {
			t.Fatalf("spindle submit exited %d:\n%s", code, logs)
		}
		took := time.Since(start)
		ev := tokenkeeper.CountEvents(logs)
		renewals, fresh, cancelled := ev.Renewed, ev.Fresh, ev.Cancelled
		t.Logf("job took %v: %d renewals, %d fresh generations, %d tokens cancelled", took.Round(time.Millisecond), renewals, fresh, cancelled)
		if fresh < 2 || renewals < 4 || cancelled < 2 {
			t.Fatalf("%d renewals and %d fresh generations (%d cancelled) in %v: want several of each\n%s", renewals, fresh, cancelled, took, logs)
		}
		// Replaced tokens go while the job runs, once the executors use
		// the fresh ones, not only at its end.
		if c, end := strings.Index(logs, tokenkeeper.MsgCancelled), strings.Index(logs, "job succeeded"); c < 0 || end < 0 || c > end {
			t.Fatalf("no token cancelled while the job ran:\n%s", logs)
		}
		// Every executor's credentials file (its container's
		// $HADOOP_TOKEN_FILE_LOCATION, which its training process reads
		// too) holds a fresh token now, and none of the job's secrets: they
		// reach the executor through a pipe, and rewriting the file with a
		// renewed token must not bring them back.
		issued, _ := s.hdfs.TokenStats()
		executors := 0
		for _, ct := range s.yarn.Containers() {
			if ct.AM || ct.ExecutorID == "" {
				continue
			}
			executors++
			creds, id := executorToken(t, ct)
			// Token 1 is the launch token, 2 the driver's first.
			if id.SequenceNumber <= 2 || id.Renewer != "alice" {
				t.Errorf("%s's credentials file holds %s (of %d issued): want a fresh token", ct.ExecutorID, id, issued)
			}
			if len(creds.Secrets) != 0 {
				t.Errorf("%s's credentials file holds %d secrets after renewals, want none", ct.ExecutorID, len(creds.Secrets))
			}
		}
		if executors != 2 {
			t.Fatalf("%d executor containers, want 2", executors)
		}
		if strings.Contains(logs, "Password") || strings.Contains(logs, "password=") {
			t.Errorf("a token's password may be in the job log")
		}
	})

	t.Run("not renewed", func(t *testing.T) {
		// Two executors: the other rank's training process fails as well
		// (its peer went) and may reach the driver first; the job's error
		// must still name the cause.
		j := s.secureJobEpochs(t, input, 2, tt.epochsPast2Max, "--conf", "spindle.security.tokens.renew=false")
		code := j.wait(t, 3*time.Minute)
		logs := j.stderr.String()
		if code != 1 {
			t.Fatalf("spindle submit exited %d, want 1:\n%s", code, logs)
		}
		last := logs[strings.LastIndex(strings.TrimSpace(logs), "\n")+1:]
		if !strings.Contains(last, "failed") || !tokenSeqRE.MatchString(last) || !strings.Contains(last, "is expired") {
			t.Fatalf("the job's error does not name the expired token:\n%s", logs)
		}
		t.Logf("the job's error: %s", last)
	})
}

// executorToken reads an executor container's credentials file (its
// $HADOOP_TOKEN_FILE_LOCATION) and the HDFS delegation token in it.
func executorToken(t *testing.T, ct yarntest.ContainerInfo) (*hadooprpc.Credentials, hadooprpc.DelegationTokenIdentifier) {
	t.Helper()
	creds, err := hadooprpc.ReadCredentialsFile(filepath.Join(ct.WorkDir, "container_tokens"))
	if err != nil {
		t.Fatal(err)
	}
	tok, ok := creds.TokenOfKind(hadooprpc.KindHDFSDelegationToken)
	if !ok {
		t.Fatalf("no HDFS token in %s's credentials", ct.ExecutorID)
	}
	id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
	if err != nil {
		t.Fatal(err)
	}
	return creds, id
}
