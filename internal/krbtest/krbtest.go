package krbtest

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spindle-ml/spindle/internal/testaddr"
)

// Realm is the test realm.
const Realm = "SPINDLE.TEST"

// KDC is a running test KDC.
type KDC struct {
	// Dir holds the database, the configuration and the keytabs.
	Dir string
	// Conf is the krb5.conf clients use (KRB5_CONFIG).
	Conf string
	// Addr is the KDC's address.
	Addr string

	t   testing.TB
	env []string
}

// binary finds a Kerberos program in PATH or the sbin directories.
func binary(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, d := range []string{"/usr/sbin", "/usr/local/sbin", "/sbin"} {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// Start starts a KDC for the test's realm, stopped when the test ends, or
// skips the test when MIT Kerberos is not installed.
func Start(t testing.TB) *KDC {
	t.Helper()
	for _, b := range []string{"krb5kdc", "kdb5_util", "kadmin.local"} {
		if _, ok := binary(b); !ok {
			t.Skipf("MIT Kerberos is not installed (no %s): apt-get install krb5-kdc krb5-admin-server krb5-user, or make test", b)
		}
	}
	dir := t.TempDir()
	// One address for UDP and TCP: the KDC listens on both.
	addr := testaddr.Free(t)
	host, port, _ := net.SplitHostPort(addr)
	// The KDC binds this loopback address only (MIT krb5 1.15 and later).
	k := &KDC{Dir: dir, Conf: filepath.Join(dir, "krb5.conf"), Addr: addr, t: t}
	kdcConf := filepath.Join(dir, "kdc.conf")
	write(t, kdcConf, fmt.Sprintf(`[kdcdefaults]
 kdc_listen = %[2]s
 kdc_tcp_listen = %[2]s
[realms]
 %[1]s = {
  database_name = %[3]s/principal
  key_stash_file = %[3]s/stash
  acl_file = %[3]s/kadm5.acl
  max_life = 1h
  max_renewable_life = 2h
  supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
 }
`, Realm, addr, dir))
	write(t, filepath.Join(dir, "kadm5.acl"), "")
	write(t, k.Conf, fmt.Sprintf(`[libdefaults]
 default_realm = %[1]s
 dns_lookup_kdc = false
 dns_lookup_realm = false
 rdns = false
 udp_preference_limit = 1
 default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
 permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
[realms]
 %[1]s = {
  kdc = %[2]s:%[3]s
 }
`, Realm, host, port))
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.Conf, "KRB5_KDC_PROFILE="+kdcConf, "KRB5CCNAME=FILE:"+filepath.Join(dir, "ccache-unused"))
	k.run("kdb5_util", "create", "-s", "-r", Realm, "-P", "master-password-for-tests")

	kdc, _ := binary("krb5kdc")
	ctx, cancel := context.WithCancel(context.Background())
	cmd := exec.CommandContext(ctx, kdc, "-n", "-r", Realm, "-P", filepath.Join(dir, "kdc.pid"))
	cmd.Env = k.env
	var log bytes.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		cancel()
		t.Fatalf("start krb5kdc: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	deadline := time.Now().Add(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case <-done:
			t.Fatalf("krb5kdc exited: %s", log.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("krb5kdc does not listen on %s: %v\n%s", addr, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	return k
}

// AddPrincipal creates principal (without the realm, as alice or
// nn/127.0.0.1) with a random key and writes its keytab, returning the
// keytab's path.
func (k *KDC) AddPrincipal(principal string) string {
	k.t.Helper()
	kt := filepath.Join(k.Dir, strings.NewReplacer("/", "_", "@", "_").Replace(principal)+".keytab")
	k.run("kadmin.local", "-r", Realm, "-q", "addprinc -randkey "+principal+"@"+Realm)
	k.run("kadmin.local", "-r", Realm, "-q", "ktadd -k "+kt+" "+principal+"@"+Realm)
	return kt
}

// Kinit gets a ticket for principal from its keytab into a new credential
// cache and returns the cache's path, as a user's kinit -kt would.
func (k *KDC) Kinit(principal, keytab string) string {
	k.t.Helper()
	cc := filepath.Join(k.Dir, "ccache-"+strings.NewReplacer("/", "_").Replace(principal))
	cmd := exec.Command("kinit", "-kt", keytab, "-c", "FILE:"+cc, principal+"@"+Realm)
	cmd.Env = k.env
	if out, err := cmd.CombinedOutput(); err != nil {
		k.t.Fatalf("kinit %s: %v\n%s", principal, err, out)
	}
	return cc
}

// Env is the environment of a process that uses this realm (KRB5_CONFIG).
func (k *KDC) Env() []string { return append([]string(nil), k.env...) }

func (k *KDC) run(name string, args ...string) {
	k.t.Helper()
	bin, _ := binary(name)
	cmd := exec.Command(bin, args...)
	cmd.Env = k.env
	if out, err := cmd.CombinedOutput(); err != nil {
		k.t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

func write(t testing.TB, path, text string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
}
