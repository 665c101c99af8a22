package krbtest

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spindle-ml/spindle/internal/syncbuf"
	"github.com/spindle-ml/spindle/internal/testutil"
)

// Programs are the MIT Kerberos programs a KDC needs (Debian's krb5-kdc
// and krb5-admin-server); kinit (krb5-user) is needed only by Kinit.
var Programs = []string{"krb5kdc", "kdb5_util", "kadmin.local"}

// ErrMissing is wrapped by StartKDC's error when a program of Programs is
// not installed.
var ErrMissing = errors.New("MIT Kerberos is not installed")

// Options configures StartKDC.
type Options struct {
	// Dir holds the database, kdc.conf, krb5.conf and keytabs; it must
	// exist.
	Dir string
	// Realm is the realm; empty means Realm.
	Realm string
	// Addr is the loopback host:port the KDC serves on, UDP and TCP;
	// empty means a free port on 127.0.0.1.
	Addr string
	// Logf, when set, receives the KDC's output if it fails to start.
	Logf func(format string, args ...any)
	// ClockOffset, when not zero, runs the KDC with its clock this far
	// from the machine's (whole seconds), for tests of clock skew: a
	// small library built with the C compiler (cc) and preloaded into
	// krb5kdc shifts the wall-clock time it reads.
	ClockOffset time.Duration
}

// SbinDirs are searched for the KDC's programs after PATH: Debian puts
// them in /usr/sbin, which a user's PATH may lack.
var SbinDirs = []string{"/usr/sbin", "/usr/local/sbin", "/sbin"}

// binary finds a Kerberos program in PATH or SbinDirs.
func binary(name string) (string, bool) {
	if p, err := exec.LookPath(name); err == nil {
		return p, true
	}
	for _, d := range SbinDirs {
		p := filepath.Join(d, name)
		if _, err := os.Stat(p); err == nil {
			return p, true
		}
	}
	return "", false
}

// Missing returns an error naming the first program of Programs that is not
// installed, wrapping ErrMissing, or nil when all are.
func Missing() error {
	for _, b := range Programs {
		if _, ok := binary(b); !ok {
			return fmt.Errorf("%w: %s not found in PATH or /usr/sbin (Debian: apt-get install krb5-kdc krb5-admin-server krb5-user)", ErrMissing, b)
		}
	}
	return nil
}

// freeLoopback returns a 127.0.0.1 address whose TCP and UDP ports are
// both free at the time of the call.
func freeLoopback() (string, error) {
	for range 50 {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return "", fmt.Errorf("find a free port: %w", err)
		}
		addr := l.Addr().String()
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return addr, nil
	}
	return "", errors.New("find a free port: no port free for both TCP and UDP")
}

// StartKDC creates a realm in opts.Dir and starts krb5kdc for it on
// loopback; Close stops it. It does not need a test: spindle minicluster
// --secure uses it too.
func StartKDC(ctx context.Context, opts Options) (*KDC, error) {
	if err := Missing(); err != nil {
		return nil, err
	}
	if opts.Realm == "" {
		opts.Realm = Realm
	}
	if opts.Addr == "" {
		a, err := freeLoopback()
		if err != nil {
			return nil, err
		}
		opts.Addr = a
	}
	dir := opts.Dir
	k := &KDC{Dir: dir, Conf: filepath.Join(dir, "krb5.conf"), Addr: opts.Addr, Realm: opts.Realm}
	kdcConf := filepath.Join(dir, "kdc.conf")
	if err := writeKDCConfig(dir, kdcConf, k.Conf, opts.Realm, opts.Addr); err != nil {
		return nil, err
	}
	k.env = append(os.Environ(), "KRB5_CONFIG="+k.Conf, "KRB5_KDC_PROFILE="+kdcConf, "KRB5CCNAME=FILE:"+filepath.Join(dir, "ccache-unused"))
	if err := k.run("kdb5_util", "create", "-s", "-r", opts.Realm, "-P", "master-password-for-tests"); err != nil {
		return nil, err
	}

	// The KDC outlives ctx, which bounds its start only: Close stops it.
	bin, _ := binary("krb5kdc")
	cmd := exec.Command(bin, "-n", "-r", opts.Realm, "-P", filepath.Join(dir, "kdc.pid"))
	cmd.Env = k.env
	if opts.ClockOffset != 0 {
		lib, err := buildClockShift(ctx, dir)
		if err != nil {
			return nil, err
		}
		cmd.Env = append(cmd.Env[:len(cmd.Env):len(cmd.Env)], "LD_PRELOAD="+lib,
			fmt.Sprintf("KRBTEST_CLOCK_OFFSET=%d", int64(opts.ClockOffset/time.Second)))
	}
	var log syncbuf.Buffer
	cmd.Stdout, cmd.Stderr = &log, &log
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start krb5kdc: %w", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	k.stop = func() { _ = cmd.Process.Kill(); <-done }
	budget := testutil.NewBudget(20 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", opts.Addr, time.Second)
		if err == nil {
			c.Close()
			return k, nil
		}
		select {
		case <-done:
			k.stop()
			return nil, fmt.Errorf("krb5kdc exited: %s", log.String())
		case <-ctx.Done():
			k.stop()
			return nil, fmt.Errorf("start krb5kdc: %w", ctx.Err())
		default:
		}
		if budget.Spent() {
			k.stop()
			return nil, fmt.Errorf("krb5kdc does not listen on %s within %s: %v\n%s", opts.Addr, budget, err, log.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// writeKDCConfig writes, in dir, the KDC's own configuration (kdcConf),
// its empty admin ACL, and the realm's krb5.conf (krb5Conf) that its
// clients read.
func writeKDCConfig(dir, kdcConf, krb5Conf, realm, addr string) error {
	host, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("KDC address %q: %w", addr, err)
	}
	// The KDC binds this loopback address only (MIT krb5 1.15 and later).
	files := map[string]string{
		kdcConf: fmt.Sprintf(`[kdcdefaults]
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
`, realm, addr, dir),
		filepath.Join(dir, "kadm5.acl"): "",
		krb5Conf: fmt.Sprintf(`[libdefaults]
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
`, realm, host, port),
	}
	for p, text := range files {
		if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
			return fmt.Errorf("write the KDC's configuration: %w", err)
		}
	}
	// krb5.conf is read by every client of the realm.
	if err := os.Chmod(krb5Conf, 0o644); err != nil {
		return fmt.Errorf("write the KDC's configuration: %w", err)
	}
	return nil
}

// Close stops the KDC and waits for it to exit.
func (k *KDC) Close() {
	k.closeOnce.Do(func() {
		if k.stop != nil {
			k.stop()
		}
	})
}

// AddPrincipals creates each principal (without the realm, as alice or
// nn/127.0.0.1) with a random key and adds its key to the keytab at path.
func (k *KDC) AddPrincipals(keytab string, principals ...string) error {
	for _, p := range principals {
		if err := k.run("kadmin.local", "-r", k.Realm, "-q", "addprinc -randkey "+p+"@"+k.Realm); err != nil {
			return err
		}
		if err := k.run("kadmin.local", "-r", k.Realm, "-q", "ktadd -k "+keytab+" "+p+"@"+k.Realm); err != nil {
			return err
		}
	}
	return nil
}

// KeytabPath is where NewPrincipal puts principal's own keytab.
func (k *KDC) KeytabPath(principal string) string {
	return filepath.Join(k.Dir, strings.NewReplacer("/", "_", "@", "_").Replace(principal)+".keytab")
}

// NewPrincipal creates principal with a random key and writes its own
// keytab, returning the keytab's path.
func (k *KDC) NewPrincipal(principal string) (string, error) {
	kt := k.KeytabPath(principal)
	return kt, k.AddPrincipals(kt, principal)
}

// TicketCache gets a ticket for principal from its keytab into a new
// credential cache with MIT's kinit, as a user's kinit -kt would, and
// returns the cache's path.
func (k *KDC) TicketCache(principal, keytab string) (string, error) {
	cc := filepath.Join(k.Dir, "ccache-"+strings.NewReplacer("/", "_").Replace(principal))
	cmd := exec.Command("kinit", "-kt", keytab, "-c", "FILE:"+cc, principal+"@"+k.Realm)
	cmd.Env = k.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("kinit %s: %v\n%s", principal, err, out)
	}
	return cc, nil
}

// Env is the environment of a process that uses this realm (KRB5_CONFIG).
func (k *KDC) Env() []string { return append([]string(nil), k.env...) }

func (k *KDC) run(name string, args ...string) error {
	bin, ok := binary(name)
	if !ok {
		return fmt.Errorf("%w: %s not found", ErrMissing, name)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = k.env
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return nil
}
