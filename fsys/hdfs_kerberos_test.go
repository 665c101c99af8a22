package fsys

import (
	"errors"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
	"github.com/spindle-ml/spindle/testbed/hdfstest"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// TestKerberizedHDFS: on an HDFS whose namenode takes Kerberos only, a
// user logged in with a keytab writes, reads and locates a file (through
// colinmarc/hdfs and Spindle's own RPC client), and without a login the
// error says how to get one.
func TestKerberizedHDFS(t *testing.T) {
	kdc, conf, aliceKeytab := startKerberizedHDFS(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	ctx := testCtx(t)

	res := NewResolver(Options{HadoopConfDir: conf, KerberosPrincipal: "alice", KerberosKeytab: aliceKeytab})
	defer res.Close()
	fs, dir, err := res.Resolve(ctx, "hdfs:///user/alice")
	if err != nil {
		t.Fatal(err)
	}
	if err := fs.MkdirAll(ctx, dir); err != nil {
		t.Fatal(err)
	}
	w, err := fs.CreateAtomic(ctx, dir+"/secret.txt")
	if err != nil {
		t.Fatalf("%v (%#v)", err, errors.Unwrap(err))
	}
	if _, err := io.WriteString(w, "only with a ticket"); err != nil {
		t.Fatal(err)
	}
	if err := w.Commit(); err != nil {
		t.Fatal(err)
	}
	f, err := fs.Open(ctx, dir+"/secret.txt")
	if err != nil {
		t.Fatal(err)
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil || string(b) != "only with a ticket" {
		t.Fatalf("read back %q, %v", b, err)
	}
	if hosts, err := fs.Locations(ctx, dir+"/secret.txt", 0, int64(len(b))); err != nil || len(hosts) == 0 {
		t.Fatalf("locations through Spindle's RPC client: %v, %v", hosts, err)
	}

	t.Setenv("KRB5CCNAME", kdc.Dir+"/no-ticket-cache")
	anon := NewResolver(Options{HadoopConfDir: conf})
	defer anon.Close()
	if _, _, err := anon.Resolve(ctx, "hdfs:///user/alice"); !errors.Is(err, ErrHadoopConfig) || !strings.Contains(err.Error(), "kinit") {
		t.Fatalf("no login: %v, want a configuration error saying to kinit", err)
	}
}

// TestKerberosLoginFromOptions: a resolver given its krb5.conf and ticket
// cache in Options logs in with them while the process's KRB5_CONFIG and
// KRB5CCNAME name other files, so tests (and programs) that talk to
// several realms need not set the environment of the whole process; one
// given only a keytab reads its krb5.conf from Options too.
func TestKerberosLoginFromOptions(t *testing.T) {
	kdc, conf, aliceKeytab := startKerberizedHDFS(t)
	cache := kdc.Kinit("alice", aliceKeytab)
	t.Setenv("KRB5_CONFIG", filepath.Join(t.TempDir(), "no-krb5.conf"))
	t.Setenv("KRB5CCNAME", filepath.Join(t.TempDir(), "no-ticket-cache"))
	ctx := testCtx(t)
	for name, opts := range map[string]Options{
		"ticket cache": {HadoopConfDir: conf, Krb5Conf: kdc.Conf, KerberosCCache: "FILE:" + cache},
		"keytab":       {HadoopConfDir: conf, Krb5Conf: kdc.Conf, KerberosPrincipal: "alice", KerberosKeytab: aliceKeytab},
	} {
		t.Run(name, func(t *testing.T) {
			res := NewResolver(opts)
			defer res.Close()
			fs, _, err := res.Resolve(ctx, "hdfs:///")
			if err != nil {
				t.Fatalf("resolve with the login of Options: %v", err)
			}
			if _, err := fs.ReadDir(ctx, "/"); err != nil {
				t.Fatalf("list / with the login of Options: %v", err)
			}
		})
	}
}

// startKerberizedHDFS starts a KDC and a test HDFS whose namenode takes
// Kerberos only, with alice its superuser; it returns the KDC, the HDFS's
// configuration directory and alice's keytab.
func startKerberizedHDFS(t *testing.T) (*krbtest.KDC, string, string) {
	t.Helper()
	kdc := krbtest.Start(t)
	nnKeytab := kdc.AddServiceKeytab("nn/127.0.0.1")
	aliceKeytab := kdc.AddPrincipal("alice")
	_, conf := startHDFS(t, hdfstest.Config{
		SASL:              hadooprpc.KerberosServer{Keytab: nnKeytab, Protocol: "nn", ServerID: "127.0.0.1"},
		KerberosPrincipal: "nn/_HOST@" + krbtest.Realm,
		Superuser:         "alice",
	})
	return kdc, conf, aliceKeytab
}
