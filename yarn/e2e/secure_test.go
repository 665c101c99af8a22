package e2e

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
)

// secureFS returns a gateway's HDFS client of the secure cluster, logged
// in from the ticket cache cc or, when cc is empty, from the user's keytab.
// Its krb5.conf and ticket cache are its own (fsys.Options), not the
// process's KRB5_CONFIG and KRB5CCNAME, so the secure tests run beside the
// others (t.Parallel); it ignores any token file of the environment.
func secureFS(t *testing.T, sc *hadooptest.SecureCluster, cc string) *fsys.Resolver {
	t.Helper()
	r := fsys.NewResolver(secureOptions(t, sc, cc))
	t.Cleanup(func() { r.Close() })
	return r
}

// secureOptions are secureFS's options.
func secureOptions(t *testing.T, sc *hadooptest.SecureCluster, cc string) fsys.Options {
	opts := fsys.Options{HadoopConfDir: sc.ConfDir, Krb5Conf: sc.KDC.Conf, NoTokens: true}
	if cc != "" {
		opts.KerberosCCache = "FILE:" + cc
	} else {
		opts.KerberosCCache = "FILE:" + filepath.Join(t.TempDir(), "no-ticket")
		opts.KerberosPrincipal, opts.KerberosKeytab = hadooptest.SecureUser, sc.UserKeytab
	}
	return opts
}

// writeSecure writes data to name on the secure cluster's HDFS as the user.
func writeSecure(t *testing.T, r *fsys.Resolver, sc *hadooptest.SecureCluster, name string, data []byte) {
	t.Helper()
	ctx := context.Background()
	h, p, err := r.Resolve(ctx, sc.Props["fs.defaultFS"]+name)
	if err != nil {
		t.Fatal(err)
	}
	if err := h.MkdirAll(ctx, path.Dir(p)); err != nil {
		t.Fatalf("mkdir %s: %v", path.Dir(p), err)
	}
	w, err := h.CreateAtomic(ctx, p)
	if err != nil {
		t.Fatalf("create %s: %v", p, err)
	}
	defer w.Abort()
	if _, err := w.Write(data); err != nil {
		t.Fatalf("write %s: %v", p, err)
	}
	if err := w.Commit(); err != nil {
		t.Fatalf("commit %s: %v", p, err)
	}
}

// TestRealSecureHDFS: Spindle's gateway writes, lists and reads a real
// Kerberized HDFS (block access tokens, SASL data transfer protection,
// HTTPS-only web endpoints) with a ticket from MIT's kinit -kt and with a
// keytab login; with neither it is refused, naming kinit.
func TestRealSecureHDFS(t *testing.T) {
	t.Parallel()
	sc := hadooptest.SharedSecure(t)
	home := "/user/" + hadooptest.SecureUser
	data := bytes.Repeat([]byte("kerberized hdfs\n"), 100000) // 1.6 MB: more than one packet
	for _, tc := range []struct {
		name   string
		ticket bool
	}{{"kinit ticket", true}, {"keytab login", false}} {
		t.Run(tc.name, func(t *testing.T) {
			cc := ""
			if tc.ticket {
				cc = sc.Kinit(t)
			}
			r := secureFS(t, sc, cc)
			name := home + "/gateway/" + strings.ReplaceAll(tc.name, " ", "-")
			writeSecure(t, r, sc, name, data)
			ctx := context.Background()
			h, p, err := r.Resolve(ctx, sc.Props["fs.defaultFS"]+name)
			if err != nil {
				t.Fatal(err)
			}
			entries, err := h.ReadDir(ctx, path.Dir(p))
			if err != nil {
				t.Fatalf("list %s: %v", path.Dir(p), err)
			}
			found := false
			for _, e := range entries {
				found = found || e.Name() == path.Base(p)
			}
			if !found {
				t.Fatalf("%s does not list %s", path.Dir(p), path.Base(p))
			}
			in, err := h.Open(ctx, p)
			if err != nil {
				t.Fatalf("open %s: %v", p, err)
			}
			got, err := io.ReadAll(in)
			in.Close()
			if err != nil || !bytes.Equal(got, data) {
				t.Fatalf("read %d bytes (%v), want the %d written", len(got), err, len(data))
			}
		})
	}
	// Spindle's security layers against Java's: a gateway that accepts
	// privacy alone on the namenode's RPC (GSSAPI, RFC 4121 wrap tokens)
	// and integrity or privacy alone on datanode connections (DIGEST-MD5
	// with the block token, RFC 2831) reads the file whole; one that wants
	// integrity alone on the RPC, which the cluster does not offer, is
	// refused naming both sides' hadoop.rpc.protection.
	for _, tc := range []struct {
		rpc, dataTransfer, refusal string
	}{
		{"privacy", "privacy", ""},
		{"privacy", "integrity", ""},
		{"integrity", "authentication", "requires hadoop.rpc.protection authentication,privacy, and this client is configured for integrity"},
	} {
		t.Run("rpc "+tc.rpc+", data transfer "+tc.dataTransfer, func(t *testing.T) {
			opts := secureOptions(t, sc, "")
			opts.HadoopConfDir = confWith(t, sc, map[string]string{"hadoop.rpc.protection": tc.rpc, "dfs.data.transfer.protection": tc.dataTransfer})
			res := fsys.NewResolver(opts)
			defer res.Close()
			ctx := context.Background()
			var got []byte
			h, _, err := res.Resolve(ctx, "hdfs:///")
			if err == nil {
				var in io.ReadCloser
				if in, err = h.Open(ctx, home+"/gateway/keytab-login"); err == nil {
					got, err = io.ReadAll(in)
					in.Close()
				}
			}
			switch {
			case tc.refusal == "" && err != nil:
				t.Fatalf("read: %v", err)
			case tc.refusal == "" && !bytes.Equal(got, data):
				t.Fatalf("read %d bytes, want the %d written", len(got), len(data))
			case tc.refusal != "" && (err == nil || !strings.Contains(err.Error(), tc.refusal)):
				t.Fatalf("%v, want a refusal saying %q", err, tc.refusal)
			}
		})
	}
	t.Run("no ticket", func(t *testing.T) {
		r := secureFS(t, sc, filepath.Join(t.TempDir(), "empty"))
		_, _, err := r.Resolve(context.Background(), sc.Props["fs.defaultFS"]+home)
		if err == nil || !strings.Contains(err.Error(), "kinit") {
			t.Fatalf("resolve without a ticket: %v, want an error that says to run kinit", err)
		}
	})
}

// confWith copies the secure cluster's client configuration with the
// values of some of its properties replaced.
func confWith(t *testing.T, sc *hadooptest.SecureCluster, values map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range []string{"core-site.xml", "hdfs-site.xml", "yarn-site.xml"} {
		b, err := os.ReadFile(filepath.Join(sc.ConfDir, name))
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		for key, v := range values {
			re := regexp.MustCompile(`<name>` + regexp.QuoteMeta(key) + `</name><value>[^<]*</value>`)
			text = re.ReplaceAllString(text, "<name>"+key+"</name><value>"+v+"</value>")
		}
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for key, v := range values {
		found := false
		for _, name := range []string{"core-site.xml", "hdfs-site.xml"} {
			b, _ := os.ReadFile(filepath.Join(dir, name))
			found = found || strings.Contains(string(b), "<name>"+key+"</name><value>"+v+"</value>")
		}
		if !found {
			t.Fatalf("the cluster's configuration has no %s to set", key)
		}
	}
	return dir
}

// TestRealSecureHDFSThirdPartyClient: colinmarc/hdfs's own hdfs command,
// unchanged, at the version Spindle builds with, lists and reads the real
// Kerberized HDFS with a ticket from MIT's kinit -kt, so the secure cluster
// is one any Hadoop client can use, not one shaped to Spindle's.
func TestRealSecureHDFSThirdPartyClient(t *testing.T) {
	t.Parallel()
	sc := hadooptest.SharedSecure(t)
	hdfsBin := hdfstest.ColinmarcCommand(t)
	data := []byte("read by a third-party client\n")
	writeSecure(t, secureFS(t, sc, ""), sc, "/user/"+hadooptest.SecureUser+"/third-party/file.txt", data)

	hdfsCmd := func(env []string, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
		defer cancel()
		cmd := exec.CommandContext(ctx, hdfsBin, args...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	env := func(cc string) []string {
		var out []string
		for _, kv := range os.Environ() {
			if !strings.HasPrefix(kv, "HADOOP_") && !strings.HasPrefix(kv, "KRB5") {
				out = append(out, kv)
			}
		}
		// colinmarc/hdfs v2.4.0 reads only at data transfer protection
		// authentication (see hadooptest.SecureDataTransferProtection).
		conf := confWith(t, sc, map[string]string{"dfs.data.transfer.protection": "authentication"})
		return append(out, "HADOOP_CONF_DIR="+conf, "KRB5_CONFIG="+sc.KDC.Conf, "KRB5CCNAME="+cc)
	}
	withTicket := env(sc.Kinit(t))
	if out, err := hdfsCmd(withTicket, "ls", "/user/"+hadooptest.SecureUser+"/third-party"); err != nil || !strings.Contains(out, "file.txt") {
		t.Fatalf("hdfs ls: %v\n%s", err, out)
	}
	if out, err := hdfsCmd(withTicket, "cat", "/user/"+hadooptest.SecureUser+"/third-party/file.txt"); err != nil || out != string(data) {
		t.Fatalf("hdfs cat: %v\n%q, want %q", err, out, data)
	}
	// Without a ticket the same command is refused: the cluster is secure.
	out, err := hdfsCmd(env(filepath.Join(t.TempDir(), "no-ticket")), "ls", "/user/"+hadooptest.SecureUser)
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("hdfs ls without a ticket: %v, want a failure\n%s", err, out)
	}
}

// submitSecure runs spindle submit --master yarn against the secure
// cluster with no ticket cache, so only the flags log in.
func submitSecure(t *testing.T, sc *hadooptest.SecureCluster, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	return submitSecureConf(t, sc, sc.ConfDir, timeout, args...)
}

// submitSecureConf is submitSecure with HADOOP_CONF_DIR set to conf.
func submitSecureConf(t *testing.T, sc *hadooptest.SecureCluster, conf string, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(timeout))
	defer cancel()
	cmd := exec.CommandContext(ctx, spindleBin, submitArgs(args...)...)
	cmd.Env = append(env(conf), "KRB5_CONFIG="+sc.KDC.Conf, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "no-ticket"))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatalf("run spindle submit: %v", err)
	}
	return code, stdout.String(), stderr.String()
}

// putSecureData generates a small Parquet data set and writes it to dir on
// the secure cluster's HDFS as the user, returning the input glob.
func putSecureData(t *testing.T, sc *hadooptest.SecureCluster, dir string) string {
	t.Helper()
	local := t.TempDir()
	cmd := exec.Command(datagenBin, "--out", local, "--rows", "3000", "--features", "4", "--files", "3",
		"--format", "parquet", "--row-group-rows", "500", "--seed", "5")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("datagen: %v\n%s", err, out)
	}
	files, _ := filepath.Glob(filepath.Join(local, "*.parquet"))
	r := secureFS(t, sc, "")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		writeSecure(t, r, sc, dir+"/"+filepath.Base(f), b)
	}
	return sc.Props["fs.defaultFS"] + dir + "/*.parquet"
}

// TestRealSecureSubmit: spindle submit --principal --keytab, with no
// ticket cache, submits to a real Kerberized ResourceManager over GSSAPI;
// the Go example runs in real secure NodeManagers' containers on data in
// the real Kerberized HDFS, which its executors open with the delegation
// token the gateway obtained (renewer: the ResourceManager's principal),
// as the namenode's audit log shows (auth:TOKEN); in cluster mode the
// driver in the ApplicationMaster reads HDFS with that token alone; with
// neither ticket nor keytab the submission is refused with exit 2 before
// anything runs.
func TestRealSecureSubmit(t *testing.T) {
	t.Parallel()
	sc := hadooptest.SharedSecure(t)
	dir := "/user/" + hadooptest.SecureUser + "/logreg-secure"
	input := putSecureData(t, sc, dir)
	t.Run("client mode", func(t *testing.T) {
		code, stdout, stderr := submitSecure(t, sc, 6*time.Minute,
			"--principal", hadooptest.SecureUser, "--keytab", sc.UserKeytab, "--name", "secure-logreg",
			"--num-executors", "2", "--executor-memory", "256m", "--input", input, "--label-column", "label",
			"--feed", "tensor", "--batch-rows", "128", "--epochs", "2", "--seed", "3", "--", logregBin, "--lr", "0.5")
		if code != 0 {
			t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"hdfs delegation token obtained", "renewer=hadoop", "all executors registered", "[rank 1] final", "succeeded"} {
			if !strings.Contains(stdout+stderr, want) {
				t.Errorf("spindle submit did not show %q:\n--- stdout\n%s\n--- stderr\n%s", want, stdout, stderr)
			}
		}
		audit, err := os.ReadFile(sc.AuditLog)
		if err != nil {
			t.Fatal(err)
		}
		tokenOpens := 0
		for _, line := range strings.Split(string(audit), "\n") {
			if strings.Contains(line, "ugi="+hadooptest.SecureUser+"@") && strings.Contains(line, "(auth:TOKEN)") &&
				strings.Contains(line, "cmd=open") && strings.Contains(line, "src="+dir+"/part-") {
				tokenOpens++
			}
		}
		if tokenOpens == 0 {
			t.Fatalf("the namenode saw no open of %s with a delegation token (auth:TOKEN): executors did not read with tokens\n%s", dir, audit)
		}
		t.Logf("executors opened the input %d times with the delegation token", tokenOpens)
	})
	t.Run("client mode, privacy only", func(t *testing.T) {
		// The gateway's configuration, which the driver ships to its
		// executors, accepts privacy alone: the gateway's Kerberos RPC, the
		// executors' token RPC (DIGEST-MD5 auth-conf) and every datanode
		// connection are encrypted, against real Hadoop's Java SASL.
		conf := confWith(t, sc, map[string]string{"hadoop.rpc.protection": "privacy", "dfs.data.transfer.protection": "privacy"})
		code, stdout, stderr := submitSecureConf(t, sc, conf, 6*time.Minute,
			"--principal", hadooptest.SecureUser, "--keytab", sc.UserKeytab, "--name", "secure-logreg-privacy",
			"--num-executors", "2", "--executor-memory", "256m", "--input", input, "--label-column", "label",
			"--feed", "tensor", "--batch-rows", "128", "--epochs", "2", "--seed", "3", "--", logregBin, "--lr", "0.5")
		if code != 0 || !strings.Contains(stdout+stderr, "[rank 1] final") {
			t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
		}
	})
	t.Run("cluster mode", func(t *testing.T) {
		// The driver runs in the ApplicationMaster, which has no ticket:
		// it logs in from the keytab the gateway put in its launch
		// credentials, plans over HDFS and keeps its executors' tokens.
		code, stdout, stderr := submitSecure(t, sc, 6*time.Minute, "--deploy-mode", "cluster",
			"--principal", hadooptest.SecureUser, "--keytab", sc.UserKeytab, "--name", "secure-logreg-cluster",
			"--num-executors", "2", "--executor-memory", "256m", "--input", input, "--label-column", "label",
			"--feed", "tensor", "--batch-rows", "128", "--epochs", "2", "--seed", "3", "--", logregBin, "--lr", "0.5")
		if code != 0 {
			t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
		}
		for _, want := range []string{"hdfs delegation token obtained", "its driver is in the ApplicationMaster",
			"the driver logged in from the keytab of its launch credentials", "planned splits", "[rank 1]", "succeeded"} {
			if !strings.Contains(stdout+stderr, want) {
				t.Errorf("spindle submit did not show %q:\n--- stdout\n%s\n--- stderr\n%s", want, stdout, stderr)
			}
		}
	})
	t.Run("no ticket, no keytab", func(t *testing.T) {
		code, stdout, stderr := submitSecure(t, sc, time.Minute, "--num-executors", "1", "--", "true")
		if code != 2 || !strings.Contains(stderr, "kinit") {
			t.Fatalf("exit %d, want 2 saying to run kinit\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
		}
	})
}

// TestRealSecurePyTorch runs the PyTorch example (real torch.distributed
// with gloo, its script shipped with --files through the staging
// directory) on the real Kerberized cluster in client and cluster mode,
// logged in from a keytab, fed from the secure HDFS by executors that hold
// only the job's delegation token: every rank ends with the same model.
func TestRealSecurePyTorch(t *testing.T) {
	t.Parallel()
	const python = "/usr/bin/python3"
	if err := exec.Command(python, "-c", "import torch, numpy").Run(); err != nil {
		t.Skipf("%s cannot import torch and numpy (make deps installs python3-torch): %v", python, err)
	}
	sc := hadooptest.SharedSecure(t)
	script := filepath.Join(testbin.Root(), "examples", "pytorch", "train.py")
	final := regexp.MustCompile(`\[rank (\d)\] final rank=\d loss=(\S+) accuracy=(\S+) params_sha256=([0-9a-f]+)`)
	input := putSecureData(t, sc, "/user/"+hadooptest.SecureUser+"/torch-secure")
	for _, mode := range []string{"client", "cluster"} {
		t.Run(mode, func(t *testing.T) {
			code, stdout, stderr := submitSecure(t, sc, 5*time.Minute, "--deploy-mode", mode,
				"--principal", hadooptest.SecureUser, "--keytab", sc.UserKeytab, "--name", "secure-torch-"+mode,
				"--num-executors", "2", "--executor-memory", "1g", "--input", input, "--label-column", "label",
				"--feed", "tensor", "--batch-rows", "128", "--epochs", "2",
				"--files", script, "--", python, "train.py", "--threads", "1")
			if code != 0 {
				t.Fatalf("spindle submit exited %d\n--- stdout\n%s\n--- stderr\n%s", code, stdout, stderr)
			}
			finals := final.FindAllStringSubmatch(stdout+stderr, -1)
			if len(finals) != 2 {
				t.Fatalf("want a final line from each of 2 ranks\n--- stdout\n%s\n--- stderr\n%s", stdout, stderr)
			}
			if finals[0][4] != finals[1][4] {
				t.Errorf("the ranks ended with different models: %s and %s", finals[0][4][:12], finals[1][4][:12])
			}
		})
	}
}

// TestRealSecureDoctor: spindle doctor checks a gateway of the real
// Kerberized cluster step by step (the KDC, the keytab login, a ticket for
// the ResourceManager's principal and a call, the default file system, a
// delegation token obtained and cancelled), with hadoop.rpc.protection
// privacy, and exits 0; with a principal
// the realm does not have it exits 2, naming the login.
func TestRealSecureDoctor(t *testing.T) {
	t.Parallel()
	sc := hadooptest.SharedSecure(t)
	// The ResourceManager and the namenode over GSSAPI at privacy: the
	// configuration asks for nothing less.
	conf := confWith(t, sc, map[string]string{"hadoop.rpc.protection": "privacy"})
	doctor := func(args ...string) (int, string) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
		defer cancel()
		cmd := exec.CommandContext(ctx, spindleBin, append([]string{"doctor"}, args...)...)
		cmd.Env = append(env(conf), "KRB5_CONFIG="+sc.KDC.Conf, "KRB5CCNAME=FILE:"+filepath.Join(t.TempDir(), "no-ticket"))
		out, err := cmd.CombinedOutput()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			return ee.ExitCode(), string(out)
		} else if err != nil {
			t.Fatalf("run spindle doctor: %v", err)
		}
		return 0, string(out)
	}
	code, out := doctor("--principal", hadooptest.SecureUser, "--keytab", sc.UserKeytab)
	if code != 0 {
		t.Fatalf("spindle doctor exited %d:\n%s", code, out)
	}
	for _, want := range []string{"ok    kdc", "ok    login", "ok    resourcemanager", "ok    hdfs", "ok    delegation token", "renewer hadoop", "hadoop.rpc.protection privacy"} {
		if !strings.Contains(out, want) {
			t.Errorf("spindle doctor did not say %q:\n%s", want, out)
		}
	}
	code, out = doctor("--principal", "mallory", "--keytab", sc.UserKeytab)
	if code != 2 || !strings.Contains(out, "FAIL  login") {
		t.Fatalf("a principal not in the keytab: exit %d, want 2 with a failed login:\n%s", code, out)
	}
}
