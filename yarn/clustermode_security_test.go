package yarn

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/fsys"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestClusterModeDelegationTokens: for a cluster-mode job on a Kerberized
// cluster the gateway obtains a delegation token, renewable by the
// ResourceManager, from the default file system and from every other
// cluster the job names wherever it names it (here only a setting, the
// checkpoint directory), keyed by service as the AM's credentials hold
// them; a process with those credentials and no ticket reaches both
// clusters; once the application has ended, Close cancels them.
func TestClusterModeDelegationTokens(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv(hadooprpc.EnvTokenFile, "")
	rmKT, nnKT := kdc.AddServiceKeytab("rm/127.0.0.1"), kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	hdfsCfg := hdfstest.Config{
		SASL:              hadooprpc.KerberosServer{Keytab: nnKT, Protocol: "nn", ServerID: "127.0.0.1"},
		KerberosPrincipal: "nn/_HOST@" + krbtest.Realm, Superuser: "alice", TokenRenewInterval: time.Hour, DataNodes: 1,
	}
	home, other := hdfstest.NewTestCluster(t, hdfsCfg), hdfstest.NewTestCluster(t, hdfsCfg)
	rm := startTestRM(t, hadooprpc.KerberosServer{Keytab: rmKT, Protocol: "rm", ServerID: "127.0.0.1"})
	conf := t.TempDir()
	if err := home.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	addProps(t, filepath.Join(conf, "yarn-site.xml"), map[string]string{
		"yarn.resourcemanager.address":           rm.addr,
		"yarn.resourcemanager.scheduler.address": "127.0.0.1:1",
		"yarn.resourcemanager.principal":         "rm/_HOST@" + krbtest.Realm,
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	cfg := DefaultConfig()
	cfg.HadoopConfDir, cfg.KerberosPrincipal, cfg.KerberosKeytab = conf, "alice", aliceKT
	g, err := newGateway(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	a := &App{gateway: g}
	otherURI := "hdfs://" + other.Addr()
	job := ClusterJob{Inputs: []string{"hdfs:///data/part-*"}, Command: []string{"./train"},
		Settings: []string{"spindle.checkpoint.dir=" + otherURI + "/ckpt"}}
	tokens, err := a.delegationTokens(ctx, job)
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	if len(tokens) != 2 {
		a.Close()
		t.Fatalf("%d tokens, want one for the default file system and one for the checkpoint cluster: %v", len(tokens), tokens)
	}
	creds := hadooprpc.NewCredentials()
	for _, c := range []*hdfstest.Cluster{home, other} {
		tok, ok := tokens[c.Addr()]
		if !ok {
			a.Close()
			t.Fatalf("no token for %s", c.Addr())
		}
		id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
		if err != nil || id.Owner != "alice" || id.Renewer != "rm" {
			a.Close()
			t.Fatalf("token for %s: %v (%v), want owner alice and renewer rm", c.Addr(), id, err)
		}
		creds.Tokens[tok.Service] = tok
	}
	b, err := creds.Marshal(hadooprpc.CredentialsWritable)
	if err != nil {
		a.Close()
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(tokFile, b, 0o600); err != nil {
		a.Close()
		t.Fatal(err)
	}
	// The driver in the AM: no ticket, only the credentials file.
	readAsAM := func() error {
		r := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, TokenFile: tokFile})
		defer r.Close()
		for _, uri := range []string{"hdfs:///", otherURI + "/"} {
			f, _, err := r.Resolve(ctx, uri)
			if err != nil {
				return err
			}
			if _, err := f.ReadDir(ctx, "/"); err != nil {
				return err
			}
		}
		return nil
	}
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket"))
	if err := readAsAM(); err != nil {
		a.Close()
		t.Fatalf("the AM's credentials do not reach both clusters: %v", err)
	}
	a.setEnded()
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := readAsAM(); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("the tokens still open HDFS after the application ended: %v", err)
	}
}
