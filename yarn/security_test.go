package yarn

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/driver"
	"github.com/spindle-ml/spindle/fsys"
	pb "github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
	"github.com/spindle-ml/spindle/yarn/client"
)

// testRM is a Kerberized ResourceManager's client port at the protocol
// level: it answers getClusterMetrics and records who called, how.
type testRM struct {
	addr string

	mu      sync.Mutex
	callers []hadooprpc.Caller
}

func startTestRM(t *testing.T, sasl hadooprpc.SASL) *testRM {
	t.Helper()
	rm := &testRM{}
	svc := hadooprpc.NewService(client.ProtocolName)
	hadooprpc.Handle(svc, "getClusterMetrics", func(ctx context.Context, _ *pb.GetClusterMetricsRequestProto) (*pb.GetClusterMetricsResponseProto, error) {
		c, _ := hadooprpc.CallerFromContext(ctx)
		rm.mu.Lock()
		rm.callers = append(rm.callers, c)
		rm.mu.Unlock()
		return &pb.GetClusterMetricsResponseProto{ClusterMetrics: &pb.YarnClusterMetricsProto{NumNodeManagers: proto.Int32(3), NumActiveNms: proto.Int32(3)}}, nil
	})
	srv, err := hadooprpc.NewServer(hadooprpc.ServerConfig{Name: "resourcemanager", SASL: sasl}, svc)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); srv.Serve(ctx, ln) }()
	t.Cleanup(func() { cancel(); <-done })
	rm.addr = ln.Addr().String()
	return rm
}

func (rm *testRM) lastCaller() hadooprpc.Caller {
	rm.mu.Lock()
	defer rm.mu.Unlock()
	if len(rm.callers) == 0 {
		return hadooprpc.Caller{}
	}
	return rm.callers[len(rm.callers)-1]
}

// addProps adds properties to one of dir's site files.
func addProps(t *testing.T, path string, props map[string]string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		b, err = []byte("<?xml version=\"1.0\"?>\n<configuration>\n</configuration>\n"), nil
	}
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

// TestKerberizedCluster: against a Kerberized ResourceManager and two
// Kerberized HDFS clusters (real MIT KDC, privacy on the RPC), the
// client-mode cluster manager logs in with a keytab and authenticates to
// the ResourceManager over GSSAPI as the keytab's user; at submit it gets
// an HDFS delegation token, renewable by the ResourceManager, from the
// default file system and from a cluster only an executor's argument
// names; the AM hands them to executors, which read both clusters with no
// ticket; the tokens are cancelled when the job ends.
func TestKerberizedCluster(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv(hadooprpc.EnvTokenFile, "")
	rmKT, nnKT := kdc.AddServiceKeytab("rm/127.0.0.1"), kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	hdfsCfg := hdfstest.Config{
		SASL:               hadooprpc.KerberosServer{Keytab: nnKT, Protocol: "nn", ServerID: "127.0.0.1", Protection: "privacy"},
		KerberosPrincipal:  "nn/_HOST@" + krbtest.Realm,
		Superuser:          "alice",
		TokenRenewInterval: time.Hour,
		DataNodes:          1,
	}
	home, other := hdfstest.NewTestCluster(t, hdfsCfg), hdfstest.NewTestCluster(t, hdfsCfg)
	rm := startTestRM(t, hadooprpc.KerberosServer{Keytab: rmKT, Protocol: "rm", ServerID: "127.0.0.1", Protection: "privacy"})

	conf := t.TempDir()
	if err := home.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	addProps(t, filepath.Join(conf, "core-site.xml"), map[string]string{"hadoop.rpc.protection": "privacy"})
	addProps(t, filepath.Join(conf, "yarn-site.xml"), map[string]string{
		"yarn.resourcemanager.address":           rm.addr,
		"yarn.resourcemanager.scheduler.address": "127.0.0.1:1",
		"yarn.resourcemanager.principal":         "rm/_HOST@" + krbtest.Realm,
	})
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()

	// Data on the other cluster, written by alice with her ticket.
	gw := fsys.NewResolver(fsys.Options{HadoopConfDir: conf, KerberosPrincipal: "alice", KerberosKeytab: aliceKT})
	defer gw.Close()
	otherURI := "hdfs://" + other.Addr()
	ofs, _, err := gw.Resolve(ctx, otherURI+"/")
	if err != nil {
		t.Fatal(err)
	}
	if err := ofs.MkdirAll(ctx, "/data"); err != nil {
		t.Fatal(err)
	}
	w, err := ofs.CreateAtomic(ctx, "/data/part-0")
	if err != nil {
		t.Fatal(err)
	}
	io.WriteString(w, "on the other cluster")
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}

	cfg := DefaultConfig()
	cfg.HadoopConfDir, cfg.KerberosPrincipal, cfg.KerberosKeytab = conf, "alice", aliceKT
	cm, err := NewClusterManager(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if c := rm.lastCaller(); c.User != "alice" || c.Auth != hadooprpc.MethodKerberos || c.Protection != hadooprpc.ProtectionPrivacy {
		t.Fatalf("the ResourceManager saw user %q by %q at %q, want alice by KERBEROS at privacy", c.User, c.Auth, c.Protection)
	}
	if cm.cfg.User != "alice" {
		t.Fatalf("staging user %q, want alice", cm.cfg.User)
	}

	creds := hadooprpc.NewCredentials()
	specs := []driver.ExecutorSpec{driverSpec("exec-0", nil, "executor", "--input", otherURI+"/data/part-*")}
	if err := cm.addDelegationTokens(ctx, creds, specs); err != nil {
		t.Fatal(err)
	}
	if len(creds.Tokens) != 2 {
		t.Fatalf("%d tokens, want one per cluster (2): %v", len(creds.Tokens), creds.Tokens)
	}
	for _, c := range []*hdfstest.Cluster{home, other} {
		tok, ok := creds.Tokens[c.Addr()]
		if !ok {
			t.Fatalf("no token for %s", c.Addr())
		}
		id, err := hadooprpc.ParseDelegationTokenIdentifier(tok.Identifier)
		if err != nil || id.Owner != "alice" || id.Renewer != "rm" {
			t.Fatalf("token for %s: %v (%v), want owner alice and renewer rm", c.Addr(), id, err)
		}
	}

	// The AM passes them on: an executor's launch context holds them.
	clc, err := executorLaunchContext(Plan{}, hdfsTokens(creds))(specs[0])
	if err != nil {
		t.Fatal(err)
	}
	tokFile := filepath.Join(t.TempDir(), "container_tokens")
	if err := os.WriteFile(tokFile, clc.GetTokens(), 0o600); err != nil {
		t.Fatal(err)
	}
	readAsExecutor := func() (string, error) {
		t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket"))
		t.Setenv(hadooprpc.EnvTokenFile, tokFile)
		defer t.Setenv(hadooprpc.EnvTokenFile, "")
		r := fsys.NewResolver(fsys.Options{HadoopConfDir: conf})
		defer r.Close()
		if _, _, err := r.Resolve(ctx, "hdfs:///"); err != nil {
			return "", err
		}
		f, _, err := r.Resolve(ctx, otherURI+"/")
		if err != nil {
			return "", err
		}
		in, err := f.Open(ctx, "/data/part-0")
		if err != nil {
			return "", err
		}
		defer in.Close()
		b, err := io.ReadAll(in)
		return string(b), err
	}
	if got, err := readAsExecutor(); err != nil || got != "on the other cluster" {
		t.Fatalf("an executor with the tokens read %q, %v", got, err)
	}

	if err := cm.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := readAsExecutor(); err == nil || !strings.Contains(err.Error(), "token") {
		t.Fatalf("the tokens still open HDFS after the job: %v", err)
	}
}

// TestKerberosRefusals: each way a Kerberos submission can be wrong is a
// configuration error (exit 2 in spindle submit) that names the problem.
func TestKerberosRefusals(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket"))
	rmKT := kdc.AddServiceKeytab("rm/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	rm := startTestRM(t, hadooprpc.KerberosServer{Keytab: rmKT, Protocol: "rm", ServerID: "127.0.0.1", Protection: "privacy"})
	writeConf := func(core, yarn map[string]string) string {
		dir := t.TempDir()
		addProps(t, filepath.Join(dir, "core-site.xml"), core)
		addProps(t, filepath.Join(dir, "yarn-site.xml"), yarn)
		return dir
	}
	secure := map[string]string{"hadoop.security.authentication": "kerberos", "hadoop.rpc.protection": "privacy"}
	rmSite := map[string]string{"yarn.resourcemanager.address": rm.addr, "yarn.resourcemanager.principal": "rm/_HOST@" + krbtest.Realm}
	good := writeConf(secure, rmSite)
	for _, tc := range []struct {
		name string
		conf string
		cfg  Config
		says string
	}{
		{"no ticket and no keytab", good, Config{}, "run kinit"},
		{"keytab without principal", good, Config{KerberosKeytab: aliceKT}, "keytab " + aliceKT + " given without its principal"},
		{"wrong realm", good, Config{KerberosPrincipal: "alice@WRONG.REALM", KerberosKeytab: aliceKT}, "WRONG.REALM"},
		{"no ResourceManager principal", writeConf(secure, map[string]string{"yarn.resourcemanager.address": rm.addr}), Config{KerberosPrincipal: "alice", KerberosKeytab: aliceKT}, "yarn.resourcemanager.principal is not set"},
		{"privacy required, not configured", writeConf(map[string]string{"hadoop.security.authentication": "kerberos"}, rmSite),
			Config{KerberosPrincipal: "alice", KerberosKeytab: aliceKT}, "requires hadoop.rpc.protection privacy"},
		{"bad protection", writeConf(map[string]string{"hadoop.security.authentication": "kerberos", "hadoop.rpc.protection": "secret"}, rmSite),
			Config{KerberosPrincipal: "alice", KerberosKeytab: aliceKT}, `"secret" is not authentication, integrity or privacy`},
		{"keytab on an insecure cluster", writeConf(map[string]string{}, rmSite), Config{KerberosPrincipal: "alice", KerberosKeytab: aliceKT}, "hadoop.security.authentication is not kerberos"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(30*time.Second))
			defer cancel()
			cfg := DefaultConfig()
			cfg.HadoopConfDir, cfg.KerberosPrincipal, cfg.KerberosKeytab = tc.conf, tc.cfg.KerberosPrincipal, tc.cfg.KerberosKeytab
			cm, err := NewClusterManager(ctx, cfg)
			if err == nil {
				cm.Close()
				t.Fatal("connected")
			}
			if !errors.Is(err, ErrConfig) || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("%v, want a configuration error saying %q", err, tc.says)
			}
		})
	}
}

// TestTokenLifetimeWarning: with spindle.security.tokens.renew false, the
// job log warns when the launch delegation tokens have lived three
// quarters of their maximum lifetime.
func TestTokenLifetimeWarning(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv(hadooprpc.EnvTokenFile, "")
	rmKT := kdc.AddServiceKeytab("rm/127.0.0.1")
	nnKT := kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	hdfs := hdfstest.NewTestCluster(t, hdfstest.Config{
		SASL:              hadooprpc.KerberosServer{Keytab: nnKT, Protocol: "nn", ServerID: "127.0.0.1"},
		KerberosPrincipal: "nn/_HOST@" + krbtest.Realm, Superuser: "alice", DataNodes: 1,
		TokenRenewInterval: time.Second, TokenMaxLifetime: 2 * time.Second,
	})
	rm := startTestRM(t, hadooprpc.KerberosServer{Keytab: rmKT, Protocol: "rm", ServerID: "127.0.0.1"})
	conf := t.TempDir()
	if err := hdfs.WriteConfig(conf); err != nil {
		t.Fatal(err)
	}
	addProps(t, filepath.Join(conf, "yarn-site.xml"), map[string]string{
		"yarn.resourcemanager.address": rm.addr, "yarn.resourcemanager.principal": "rm/_HOST@" + krbtest.Realm,
	})
	var logs syncbuf.Buffer
	cfg := DefaultConfig()
	cfg.HadoopConfDir, cfg.KerberosPrincipal, cfg.KerberosKeytab = conf, "alice", aliceKT
	cfg.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	// Executors use the launch tokens: the driver keeps none of its own.
	cfg.RenewTokens = false
	ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
	defer cancel()
	cm, err := NewClusterManager(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer cm.Close()
	if err := cm.addDelegationTokens(ctx, hadooprpc.NewCredentials(), nil); err != nil {
		t.Fatal(err)
	}
	for !strings.Contains(logs.String(), "near their maximum lifetime") {
		select {
		case <-ctx.Done():
			t.Fatalf("no warning:\n%s", logs.String())
		case <-time.After(20 * time.Millisecond):
		}
	}
	if !strings.Contains(logs.String(), "cluster=hdfs://"+hdfs.Addr()) {
		t.Fatalf("the warning does not name the cluster:\n%s", logs.String())
	}
}
