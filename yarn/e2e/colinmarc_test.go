package e2e

import (
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/colinmarc/hdfs/v2"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/internal/hadoop/kerberos"
	"github.com/spindle-ml/spindle/testbed/hadooptest"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestColinmarcClientOnSecureNamenodes: colinmarc/hdfs's own client, with
// its own SASL (which sends its calls unwrapped after negotiating
// privacy), lists / on the real Kerberized mini cluster and on the test
// namenode at hadoop.rpc.protection privacy alike (spindle minicluster
// --secure's namenode).
func TestColinmarcClientOnSecureNamenodes(t *testing.T) {
	t.Parallel()
	t.Run("real hadoop", func(t *testing.T) {
		sc := hadooptest.SharedSecure(t)
		u, err := url.Parse(sc.Props["fs.defaultFS"])
		if err != nil {
			t.Fatal(err)
		}
		service, _, _ := strings.Cut(sc.Principal, "@")
		service = strings.Replace(service, "/localhost", "/_HOST", 1)
		listRoot(t, u.Host, sc.KDC.Conf, hadooptest.SecureUser, sc.UserKeytab, service)
	})
	t.Run("test hdfs", func(t *testing.T) {
		kdc := krbtest.Start(t)
		cluster := hdfstest.NewTestCluster(t, hdfstest.Config{Dir: t.TempDir(), DataNodes: 1, Superuser: "alice",
			SASL:              hadooprpc.KerberosServer{Keytab: kdc.AddServiceKeytab("nn/127.0.0.1"), Protocol: "nn", ServerID: "127.0.0.1", Protection: hadooprpc.ProtectionPrivacy},
			KerberosPrincipal: "nn/_HOST@" + krbtest.Realm,
			// A secure namenode offers delegation tokens (DIGEST-MD5) beside
			// Kerberos, whose challenge colinmarc/hdfs reads the protection from.
			TokenRenewInterval: time.Hour})
		listRoot(t, cluster.Addr(), kdc.Conf, "alice", kdc.AddPrincipal("alice"), "nn/_HOST")
	})
}

func listRoot(t *testing.T, addr, krb5Conf, user, keytab, service string) {
	t.Helper()
	login, err := kerberos.Login(kerberos.Options{Conf: krb5Conf, Principal: user, Keytab: keytab})
	if err != nil {
		t.Fatal(err)
	}
	defer login.Destroy()
	c, err := hdfs.NewClient(hdfs.ClientOptions{Addresses: []string{addr}, User: user,
		KerberosClient: login, KerberosServicePrincipleName: service})
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	defer c.Close()
	if _, err := c.ReadDir("/"); err != nil {
		t.Fatalf("ls / on %s: %v", addr, err)
	}
}
