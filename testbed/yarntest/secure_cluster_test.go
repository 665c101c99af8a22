package yarntest_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/driver/tokenkeeper"
)

// TestSecureTokenRenewalClusterMode: the job of TestSecureTokenRenewal in
// --deploy-mode cluster, on nodes whose containers have no KRB5_CONFIG.
// With --principal and --keytab the gateway sends the keytab (and its
// krb5.conf) to the ApplicationMaster in its launch credentials only; the
// driver there writes them to private files, logs in, and runs through
// several renewals and re-logins, sending fresh tokens to its running
// executors; the keytab's bytes are in no log, launch script or other
// file of any container. With the ticket cache only, the driver runs on
// the gateway's launch tokens and the job log warns before their maximum
// lifetime.
func TestSecureTokenRenewalClusterMode(t *testing.T) {
	tt := newTokenTimes()
	s := startSecureSiteDropping(t, tt.renew, tt.max, []string{"KRB5_CONFIG"})
	input := s.putData(t)
	kt, err := os.ReadFile(s.keytab)
	if err != nil {
		t.Fatal(err)
	}

	t.Run("keytab", func(t *testing.T) {
		start := time.Now()
		// The job outlives two of its tokens' lifetimes however fast this
		// machine is.
		j := s.secureJobEpochs(t, input, 2, tt.epochsPast2Max, "--deploy-mode", "cluster")
		code := j.wait(t, 3*time.Minute)
		logs := j.stderr.String()
		if code != 0 {
			t.Fatalf("spindle submit exited %d:\n%s", code, logs)
		}
		took := time.Since(start)
		ev := tokenkeeper.CountEvents(logs)
		renewals, fresh, cancelled := ev.Renewed, ev.Fresh, ev.Cancelled
		t.Logf("job took %v: %d renewals, %d fresh generations, %d tokens cancelled", took.Round(time.Millisecond), renewals, fresh, cancelled)
		if !strings.Contains(logs, "the driver logged in from the keytab of its launch credentials") {
			t.Fatalf("the driver in the ApplicationMaster did not log in from the keytab:\n%s", logs)
		}
		if fresh < 2 || renewals < 4 || cancelled < 2 {
			t.Fatalf("%d renewals and %d fresh generations (%d cancelled) in %v: want several of each\n%s", renewals, fresh, cancelled, took, logs)
		}
		var am, executors int
		for _, ct := range s.yarn.Containers() {
			if ct.AM {
				am++
				checkAMLoginFiles(t, ct.WorkDir, kt)
				// The AM removes the staging directory with the driver's
				// login, after the launch tokens' maximum lifetime.
				b, err := os.ReadFile(filepath.Join(ct.LogDir, "stderr"))
				if err != nil {
					t.Fatal(err)
				}
				if strings.Contains(string(b), "remove staging directory") {
					t.Errorf("the ApplicationMaster did not remove the staging directory:\n%s", b)
				}
			}
			if !ct.AM && ct.ExecutorID != "" {
				executors++
				_, id := executorToken(t, ct)
				// Token 1 is the launch token, 2 the driver's first.
				if id.SequenceNumber <= 2 || id.Renewer != "alice" {
					t.Errorf("%s's credentials file holds %s: want a fresh token of the driver's login", ct.ExecutorID, id)
				}
			}
			for _, dir := range []string{ct.WorkDir, ct.LogDir} {
				checkNoKeytab(t, dir, kt)
			}
		}
		if am != 1 || executors != 2 {
			t.Fatalf("%d ApplicationMasters and %d executor containers, want 1 and 2", am, executors)
		}
		if leaks(logs, kt) {
			t.Error("the keytab is in spindle submit's output")
		}
	})

	t.Run("ticket cache", func(t *testing.T) {
		// No keytab: the gateway's ticket (KRB5CCNAME); the driver keeps
		// no tokens of its own and the job log warns. The test
		// ResourceManager does not renew launch tokens, so these live their
		// whole (short) lifetime without renewal. The job has far more
		// epochs than it can take in that lifetime (its training process
		// sleeps per batch, spending little CPU): it is still running at
		// three quarters of it, and ends when its tokens expire.
		s := startSecureSiteDropping(t, 2*tt.renew, 2*tt.renew, []string{"KRB5_CONFIG"})
		input := s.putData(t)
		before := len(s.yarn.Containers())
		j := s.submit(t, "--deploy-mode", "cluster", "--conf", "spindle.executor.heartbeatInterval=200ms",
			"--conf", "spindle.feed.cacheMemory=0", "--num-executors", "1", "--executor-memory", "256m",
			"--input", input, "--label-column", "label", "--feed", "tensor", "--batch-rows", "64",
			"--epochs", "1000000", "--seed", "3", "--", feedcheckBin, "--batch-delay", tokenBatchDelay.String())
		code := j.wait(t, 3*time.Minute)
		logs := j.stderr.String()
		if !strings.Contains(logs, "hdfs delegation tokens near their maximum lifetime") {
			t.Fatalf("spindle submit exited %d without warning of the tokens' maximum lifetime:\n%s", code, logs)
		}
		if strings.Contains(logs, "logged in again") || strings.Contains(logs, "the driver logged in from the keytab") {
			t.Fatalf("a driver without a keytab logged in:\n%s", logs)
		}
		// The job ends with its tokens' life, naming the expired token.
		if code != 1 || !tokenSeqRE.MatchString(logs) || !strings.Contains(logs, "is expired") {
			t.Fatalf("spindle submit exited %d, want 1 naming the expired token:\n%s", code, logs)
		}
		t.Logf("spindle submit exited %d", code)
		for _, ct := range s.yarn.Containers()[before:] {
			if _, err := os.Stat(filepath.Join(ct.WorkDir, ".spindle-login")); err == nil {
				t.Errorf("container %s has a login directory, with no keytab sent", ct.ID)
			}
		}
	})
}

// checkAMLoginFiles checks the driver's keytab in the AM's container: the
// keytab's bytes, in a file and a directory only its user can read, with
// the gateway's krb5.conf beside it.
func checkAMLoginFiles(t *testing.T, work string, kt []byte) {
	t.Helper()
	dir := filepath.Join(work, ".spindle-login")
	for _, c := range []struct {
		path string
		mode os.FileMode
	}{{dir, 0o700 | fs.ModeDir}, {filepath.Join(dir, "driver.keytab"), 0o600}, {filepath.Join(dir, "krb5.conf"), 0o600}} {
		fi, err := os.Stat(c.path)
		if err != nil {
			t.Fatalf("the ApplicationMaster's login: %v", err)
		}
		if fi.Mode() != c.mode {
			t.Errorf("%s has mode %v, want %v", c.path, fi.Mode(), c.mode)
		}
	}
	b, err := os.ReadFile(filepath.Join(dir, "driver.keytab"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(b, kt) {
		t.Error("the ApplicationMaster's keytab differs from the gateway's")
	}
}

// checkNoKeytab fails when a file under dir holds the keytab's bytes,
// raw, in base64 or in hex, other than the keytab file the driver wrote
// and the container's credentials (where the keytab travels).
func checkNoKeytab(t *testing.T, dir string, kt []byte) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || d.Type()&fs.ModeSymlink != 0 {
			return nil
		}
		if d.Name() == "container_tokens" || (d.Name() == "driver.keytab" && filepath.Base(filepath.Dir(p)) == ".spindle-login") {
			return nil
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil
		}
		if leaks(string(b), kt) {
			t.Errorf("%s holds the keytab", p)
		}
		return nil
	})
}

// leaks says whether text holds kt, raw, in base64 or in hex.
func leaks(text string, kt []byte) bool {
	return strings.Contains(text, string(kt)) || strings.Contains(text, base64.StdEncoding.EncodeToString(kt)) ||
		strings.Contains(text, base64.RawStdEncoding.EncodeToString(kt)) || strings.Contains(strings.ToLower(text), hex.EncodeToString(kt))
}
