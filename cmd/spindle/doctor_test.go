package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooppb"
	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
	yarnclient "github.com/spindle-ml/spindle/yarn/client"
)

// startKerberizedRM serves getClusterMetrics to Kerberos callers.
func startKerberizedRM(t *testing.T, sasl hadooprpc.SASL) string {
	t.Helper()
	svc := hadooprpc.NewService(yarnclient.ProtocolName)
	hadooprpc.Handle(svc, "getClusterMetrics", func(ctx context.Context, _ *hadooppb.GetClusterMetricsRequestProto) (*hadooppb.GetClusterMetricsResponseProto, error) {
		return &hadooppb.GetClusterMetricsResponseProto{ClusterMetrics: &hadooppb.YarnClusterMetricsProto{NumNodeManagers: proto.Int32(4)}}, nil
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
	return ln.Addr().String()
}

// TestDoctor: spindle doctor on a Kerberized gateway (real MIT KDC, a
// Kerberized ResourceManager and HDFS at privacy) finds the KDC, logs in
// with the keytab, gets the ResourceManager's ticket, calls it and HDFS,
// and reports the delegation token a job would get, cancelling it; a
// principal the KDC does not know is exit 2, naming it.
func TestDoctor(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	t.Setenv(hadooprpc.EnvTokenFile, "")
	rmKT, nnKT := kdc.AddServiceKeytab("rm/127.0.0.1"), kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKT := kdc.AddPrincipal("alice")
	hdfs := hdfstest.NewTestCluster(t, hdfstest.Config{
		SASL:               hadooprpc.KerberosServer{Keytab: nnKT, Protocol: "nn", ServerID: "127.0.0.1", Protection: "privacy"},
		KerberosPrincipal:  "nn/_HOST@" + krbtest.Realm,
		TokenRenewInterval: time.Hour, DataNodes: 1,
	})
	rm := startKerberizedRM(t, hadooprpc.KerberosServer{Keytab: rmKT, Protocol: "rm", ServerID: "127.0.0.1", Protection: "privacy"})
	writeConfDir := func(rmPrincipal string) string {
		dir := t.TempDir()
		if err := hdfs.WriteConfig(dir); err != nil {
			t.Fatal(err)
		}
		core, _ := os.ReadFile(filepath.Join(dir, "core-site.xml"))
		core = []byte(strings.Replace(string(core), "</configuration>", "<property><name>hadoop.rpc.protection</name><value>privacy</value></property></configuration>", 1))
		yarn := fmt.Sprintf(`<configuration><property><name>yarn.resourcemanager.address</name><value>%s</value></property>`+
			`<property><name>yarn.resourcemanager.principal</name><value>%s</value></property></configuration>`, rm, rmPrincipal)
		if os.WriteFile(filepath.Join(dir, "core-site.xml"), core, 0o644) != nil || os.WriteFile(filepath.Join(dir, "yarn-site.xml"), []byte(yarn), 0o644) != nil {
			t.Fatal("write the configuration")
		}
		return dir
	}
	run := func(conf string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), testutil.Scale(time.Minute))
		defer cancel()
		var out syncbuf.Buffer
		app := newApp()
		app.Writer, app.ErrWriter = &out, &out
		err := app.RunContext(ctx, []string{"spindle", "doctor", "--hadoop-conf-dir", conf, "--principal", "alice", "--keytab", aliceKT})
		return out.String(), err
	}

	out, err := run(writeConfDir("rm/_HOST@" + krbtest.Realm))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{
		"ok    kdc                " + kdc.Addr,
		"ok    login              alice@" + krbtest.Realm + " (keytab " + aliceKT + ")",
		"ticket for rm/127.0.0.1",
		"answers alice@" + krbtest.Realm + ": 4 NodeManagers",
		"kerberos, hadoop.rpc.protection privacy",
		"HDFS_DELEGATION_TOKEN for " + hdfs.Addr() + ", owner alice, renewer rm",
		"(obtained and cancelled)",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the report lacks %q:\n%s", want, out)
		}
	}
	if issued, _ := hdfs.TokenStats(); issued != 1 {
		t.Errorf("%d tokens issued, want 1", issued)
	}

	out, err = run(writeConfDir("yarn/_HOST@" + krbtest.Realm))
	if code := exitCode(err); code != exitUsage || !strings.Contains(out, "FAIL  resourcemanager") || !strings.Contains(err.Error(), "yarn/127.0.0.1") {
		t.Fatalf("an unknown ResourceManager principal: exit %d, %v\n%s", code, err, out)
	}
}
