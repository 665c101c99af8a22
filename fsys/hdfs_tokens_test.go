package fsys

import (
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestDelegationTokens: on an HDFS that takes Kerberos and delegation
// tokens, both at privacy, a gateway logged in with a keytab gets a token
// for a renewer, and a process with no ticket at all reads and writes with
// that token alone through colinmarc/hdfs and Spindle's own client, as an
// executor in a YARN container does, its namenode connections encrypted
// (DIGEST-MD5 auth-conf) and its datanode connections too
// (dfs.data.transfer.protection privacy, with the namenode's block
// tokens); one configured for less is refused. The renewer, and only it, renews the
// token; once cancelled, the token opens nothing; a process with a token
// cannot get more.
func TestDelegationTokens(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	nnKeytab := kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKeytab := kdc.AddPrincipal("alice")
	yarnKeytab := kdc.AddPrincipal("yarn/127.0.0.1")
	cluster, conf := startHDFS(t, hdfstest.Config{
		SASL:               hadooprpc.KerberosServer{Keytab: nnKeytab, Protocol: "nn", ServerID: "127.0.0.1", Protection: "privacy"},
		KerberosPrincipal:  "nn/_HOST@" + krbtest.Realm,
		Superuser:          "alice",
		TokenRenewInterval: time.Hour,
		// Datanodes too, as on a production cluster.
		DataTransferProtection: "privacy",
	})
	// The client side of hadoop.rpc.protection.
	core, err := os.ReadFile(filepath.Join(conf, "core-site.xml"))
	if err != nil {
		t.Fatal(err)
	}
	core = []byte(strings.Replace(string(core), "</configuration>", "<property><name>hadoop.rpc.protection</name><value>privacy</value></property></configuration>", 1))
	if err := os.WriteFile(filepath.Join(conf, "core-site.xml"), core, 0o644); err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t)
	t.Setenv(hadooprpc.EnvTokenFile, "")

	gateway := NewResolver(Options{HadoopConfDir: conf, KerberosPrincipal: "alice", KerberosKeytab: aliceKeytab})
	defer gateway.Close()
	fs, _, err := gateway.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, fs, "/user/alice/data.txt", "read with a token")
	tok, err := gateway.DelegationToken(ctx, "hdfs:///user/alice", "yarn")
	if err != nil {
		t.Fatal(err)
	}
	if want := cluster.NameNodeAddrs()[0]; tok.Kind != hadooprpc.KindHDFSDelegationToken || tok.Service != want {
		t.Fatalf("token %s, want an HDFS delegation token for %s", tok, want)
	}
	creds := hadooprpc.NewCredentials()
	creds.Tokens[tok.Service] = tok
	b, err := creds.Marshal(hadooprpc.CredentialsWritable)
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(tokFile, b, 0o600); err != nil {
		t.Fatal(err)
	}

	// The executor: no ticket cache, no keytab, the token file only.
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket-cache"))
	t.Setenv(hadooprpc.EnvTokenFile, tokFile)
	exec := NewResolver(Options{HadoopConfDir: conf})
	efs, _, err := exec.Resolve(ctx, "hdfs:///")
	if err != nil {
		t.Fatalf("with a delegation token only: %v", err)
	}
	if got := readFile(t, efs, "/user/alice/data.txt"); got != "read with a token" {
		t.Fatalf("read %q", got)
	}
	writeFile(t, efs, "/user/alice/out.txt", "written with a token")
	if fi, err := efs.Stat(ctx, "/user/alice/out.txt"); err != nil || fileOwner(fi) != "alice" {
		t.Fatalf("the token's file: owner %q, %v; want alice", fileOwner(fi), err)
	}
	if hosts, err := efs.Locations(ctx, "/user/alice/data.txt", 0, 1); err != nil || len(hosts) == 0 {
		t.Fatalf("locations through Spindle's client with the token: %v, %v", hosts, err)
	}
	if _, err := exec.DelegationToken(ctx, "hdfs:///", "yarn"); err == nil || !strings.Contains(err.Error(), "only with kerberos") {
		t.Fatalf("a token connection got a token: %v", err)
	}
	exec.Close()
	// The token's connections ran at privacy (DIGEST-MD5 auth-conf), as
	// the namenode requires of every method.
	if n := cluster.Stats().NameNodeCallsByAuth["TOKEN privacy"]; n == 0 {
		t.Fatalf("no namenode call over a token connection at privacy: %v", cluster.Stats().NameNodeCallsByAuth)
	}
	if st := cluster.Stats(); st.Handshakes == 0 || st.HandshakesRefused != 0 {
		t.Fatalf("datanode handshakes: %d, %d refused", st.Handshakes, st.HandshakesRefused)
	}
	// An executor whose site files ask for less than the namenode requires
	// is refused, naming the setting.
	lax := confCopy(t, conf, func(site string) string {
		return strings.Replace(site, "<value>privacy</value>", "<value>authentication</value>", 1)
	})
	laxExec := NewResolver(Options{HadoopConfDir: lax})
	defer laxExec.Close()
	if _, _, err := laxExec.Resolve(ctx, "hdfs:///"); !errors.Is(err, hadooprpc.ErrProtection) || !errors.Is(err, ErrHadoopConfig) ||
		!strings.Contains(err.Error(), "requires hadoop.rpc.protection privacy of token connections, and this client is configured for authentication") {
		t.Fatalf("a token client configured for authentication, a namenode requiring privacy: %v", err)
	}

	// Renewal: the renewer only.
	if _, err := gateway.RenewDelegationToken(ctx, "hdfs:///", tok); hadooprpc.ExceptionClass(err) != hadooprpc.ClassAccessControl {
		t.Fatalf("the owner renewed a token for yarn: %v", err)
	}
	t.Setenv(hadooprpc.EnvTokenFile, "")
	rm := NewResolver(Options{HadoopConfDir: conf, KerberosPrincipal: "yarn/127.0.0.1", KerberosKeytab: yarnKeytab})
	defer rm.Close()
	exp, err := rm.RenewDelegationToken(ctx, "hdfs:///", tok)
	if err != nil || time.Until(exp) < 50*time.Minute {
		t.Fatalf("the renewer renewed until %v, %v", exp, err)
	}
	if _, renewed := cluster.TokenStats(); renewed != 1 {
		t.Fatalf("%d renewals, want 1", renewed)
	}

	// Cancelled, the token opens nothing.
	if err := gateway.CancelDelegationToken(ctx, "hdfs:///", tok); err != nil {
		t.Fatal(err)
	}
	// Cancelling it again (the ResourceManager was first) is no error.
	if err := gateway.CancelDelegationToken(ctx, "hdfs:///", tok); err != nil {
		t.Fatalf("cancel a cancelled token: %v", err)
	}
	t.Setenv(hadooprpc.EnvTokenFile, tokFile)
	cancelled := NewResolver(Options{HadoopConfDir: conf})
	defer cancelled.Close()
	if _, _, err := cancelled.Resolve(ctx, "hdfs:///"); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("a cancelled token: %v", err)
	}
	// Without the token file and without a ticket: how to log in.
	t.Setenv(hadooprpc.EnvTokenFile, "")
	anon := NewResolver(Options{HadoopConfDir: conf})
	defer anon.Close()
	if _, _, err := anon.Resolve(ctx, "hdfs:///"); !errors.Is(err, ErrHadoopConfig) || !strings.Contains(err.Error(), "kinit") {
		t.Fatalf("no token, no ticket: %v", err)
	}
}

func writeFile(t *testing.T, fs FS, name, text string) {
	t.Helper()
	ctx := testCtx(t)
	w, err := fs.CreateAtomic(ctx, name)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(w, text); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, fs FS, name string) string {
	t.Helper()
	f, err := fs.Open(testCtx(t), name)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := io.ReadAll(f)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fileOwner is the HDFS owner of a file's status.
func fileOwner(fi any) string {
	if o, ok := fi.(interface{ Owner() string }); ok {
		return o.Owner()
	}
	return ""
}
