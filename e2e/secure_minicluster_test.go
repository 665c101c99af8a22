package e2e

import (
	"bufio"
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// startSecureMinicluster runs spindle minicluster --secure in dir with
// one datanode and one NodeManager, the user alice, and --put of the
// Parquet files in data; it returns once the usage is printed, with the
// usage, and stops the minicluster when the test ends.
func startSecureMinicluster(t *testing.T, dir, data string) string {
	t.Helper()
	return startMinicluster(t, dir, data, "--secure")
}

// startMinicluster is startSecureMinicluster with the minicluster's flags
// given: none for one without Kerberos.
func startMinicluster(t *testing.T, dir, data string, flags ...string) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	args := append([]string{"minicluster"}, flags...)
	args = append(args, "--dir", dir, "--datanodes", "1", "--nodemanagers", "1", "--nm-memory", "4GiB", "--log-level", "warn",
		"--put", filepath.Join(data, "*.parquet")+"=/user/alice/data")
	cmd := exec.CommandContext(ctx, spindleBin, args...)
	cmd.Env = append(testEnv(), "HADOOP_USER_NAME=alice")
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGINT) }
	cmd.WaitDelay = 20 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	logf, err := os.Create(filepath.Join(t.TempDir(), "minicluster.err"))
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
		io.Copy(io.Discard, out)
	}()
	t.Cleanup(func() {
		cancel()
		cmd.Wait()
		logf.Close()
	})
	var usage strings.Builder
	deadline := time.After(testutil.Scale(2 * time.Minute))
	for {
		select {
		case line, ok := <-lines:
			if !ok {
				b, _ := os.ReadFile(logf.Name())
				t.Fatalf("spindle minicluster %v exited:\n%s\n%s", flags, usage.String(), b)
			}
			usage.WriteString(line + "\n")
			if strings.Contains(line, "Press Ctrl-C") {
				go func() {
					for range lines {
					}
				}()
				return usage.String()
			}
		case <-deadline:
			t.Fatalf("spindle minicluster %v did not start:\n%s", flags, usage.String())
		}
	}
}

// TestSecureMinicluster: spindle minicluster --secure starts a KDC and a
// Kerberized test HDFS and YARN with every connection at privacy (the
// RPC, Kerberos and token alike, and datanodes), and from the files it writes and the
// commands it prints, spindle submit runs the Go example on YARN in client
// mode (a keytab login, no ticket) and in cluster mode (a ticket from MIT's
// kinit -kt), where the driver in the ApplicationMaster has only the
// delegation tokens the gateway obtained; without a ticket or keytab the
// submit is refused with exit 2.
func TestSecureMinicluster(t *testing.T) {
	t.Parallel()
	if err := krbtest.Missing(); err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	usage := startSecureMinicluster(t, dir, generate(t, "parquet", 6000, 3))
	confDir := filepath.Join(dir, "hadoop-conf")
	krb5Conf := filepath.Join(dir, "kdc", "krb5.conf")
	keytab := filepath.Join(dir, "kdc", "alice.keytab")
	for _, want := range []string{"export KRB5_CONFIG=" + krb5Conf, "kinit -kt " + keytab + " alice@" + krbtest.Realm,
		"export HADOOP_CONF_DIR=" + confDir, "--principal alice --keytab " + keytab} {
		if !strings.Contains(usage, want) {
			t.Fatalf("the usage does not say %q:\n%s", want, usage)
		}
	}
	// A production-like secure cluster: Kerberos, and every connection
	// (Kerberos and token RPC, datanodes) encrypted.
	for _, c := range []struct{ file, want string }{
		{"core-site.xml", "kerberos"},
		{"core-site.xml", "<name>hadoop.rpc.protection</name>\n    <value>privacy</value>"},
		{"hdfs-site.xml", "nn/_HOST@" + krbtest.Realm},
		{"hdfs-site.xml", "<name>dfs.data.transfer.protection</name>\n    <value>privacy</value>"},
		{"yarn-site.xml", "rm/_HOST@" + krbtest.Realm},
	} {
		b, err := os.ReadFile(filepath.Join(confDir, c.file))
		if err != nil || !strings.Contains(string(b), c.want) {
			t.Fatalf("%s does not say %q (%v):\n%s", c.file, c.want, err, b)
		}
	}
	noTicket := "KRB5CCNAME=FILE:" + filepath.Join(t.TempDir(), "no-ticket")
	env := []string{"HADOOP_CONF_DIR=" + confDir, "KRB5_CONFIG=" + krb5Conf}
	job := []string{"--master", "yarn", "--conf", "spindle.network.interface=lo", "--num-executors", "2",
		"--executor-memory", "256m", "--input", "hdfs:///user/alice/data/part-*", "--label-column", "label",
		"--feed", "tensor", "--epochs", "2", "--", logregBin}
	trained := regexp.MustCompile(`final rank=\d epochs=2 loss=\S+ accuracy=0\.[6-9]`)

	t.Run("client mode, keytab", func(t *testing.T) {
		r := spindleEnv(t, t.TempDir(), append(env, noTicket),
			submitArgs(append([]string{"--principal", "alice", "--keytab", keytab}, job...)...)...)
		if r.code != 0 || len(trained.FindAllString(r.stdout, -1)) != 2 {
			t.Fatalf("want 2 ranks to train on the secure minicluster:\n%s", r)
		}
	})
	t.Run("cluster mode, kinit ticket", func(t *testing.T) {
		cc := filepath.Join(t.TempDir(), "ccache")
		kinit := exec.Command("kinit", "-kt", keytab, "-c", "FILE:"+cc, "alice@"+krbtest.Realm)
		kinit.Env = append(os.Environ(), "KRB5_CONFIG="+krb5Conf)
		if out, err := kinit.CombinedOutput(); err != nil {
			t.Fatalf("kinit -kt as printed: %v\n%s", err, out)
		}
		r := spindleEnv(t, t.TempDir(), append(env, "KRB5CCNAME=FILE:"+cc),
			submitArgs(append([]string{"--deploy-mode", "cluster"}, job...)...)...)
		if r.code != 0 || len(trained.FindAllString(r.stdout+r.stderr, -1)) != 2 {
			t.Fatalf("want 2 ranks to train in cluster mode on the secure minicluster:\n%s", r)
		}
		// The driver ran in the ApplicationMaster, which has no ticket:
		// it planned the splits over HDFS with the delegation token alone.
		if !strings.Contains(r.stderr, "its driver is in the ApplicationMaster") {
			t.Fatalf("the driver did not run in the ApplicationMaster:\n%s", r)
		}
	})
	t.Run("colinmarc's hdfs command, kinit ticket", func(t *testing.T) {
		// A third-party client, unchanged, reads the cluster from the files
		// the minicluster wrote, at their protection (privacy): its SASL
		// sends calls unwrapped after negotiating it, as Hadoop's server
		// takes them.
		hdfsBin := hdfstest.ColinmarcCommand(t)
		cc := filepath.Join(t.TempDir(), "ccache")
		kinit := exec.Command("kinit", "-kt", keytab, "-c", "FILE:"+cc, "alice@"+krbtest.Realm)
		kinit.Env = append(os.Environ(), "KRB5_CONFIG="+krb5Conf)
		if out, err := kinit.CombinedOutput(); err != nil {
			t.Fatalf("kinit -kt as printed: %v\n%s", err, out)
		}
		hdfsCmd := func(ccache string, args ...string) (string, error) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
			defer cancel()
			cmd := exec.CommandContext(ctx, hdfsBin, args...)
			cmd.Env = append(testEnv(), append(env, "KRB5CCNAME=FILE:"+ccache)...)
			out, err := cmd.CombinedOutput()
			return string(out), err
		}
		if out, err := hdfsCmd(cc, "ls", "/user/alice/data"); err != nil || !strings.Contains(out, "part-") {
			t.Fatalf("hdfs ls /user/alice/data with a ticket: %v\n%s", err, out)
		}
		// put and cat go through a datanode at its privacy (AES-CTR).
		local := filepath.Join(t.TempDir(), "note.txt")
		if err := os.WriteFile(local, []byte("written by a third-party client\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		if out, err := hdfsCmd(cc, "put", local, "/user/alice/note.txt"); err != nil {
			t.Fatalf("hdfs put with a ticket: %v\n%s", err, out)
		}
		if out, err := hdfsCmd(cc, "cat", "/user/alice/note.txt"); err != nil || out != "written by a third-party client\n" {
			t.Fatalf("hdfs cat with a ticket: %v\n%q", err, out)
		}
		if out, err := hdfsCmd(filepath.Join(t.TempDir(), "no-ticket"), "ls", "/user/alice/data"); err == nil {
			t.Fatalf("hdfs ls without a ticket listed the secure cluster:\n%s", out)
		}
	})
	t.Run("no ticket, no keytab", func(t *testing.T) {
		r := spindleEnv(t, t.TempDir(), append(env, noTicket), submitArgs(append([]string{"--deploy-mode", "cluster"}, job...)...)...)
		if r.code != 2 || !strings.Contains(r.stderr, "kinit") {
			t.Fatalf("want exit 2 saying to run kinit:\n%s", r)
		}
	})
}
