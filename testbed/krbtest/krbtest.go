package krbtest

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/jcmturner/gokrb5/v8/keytab"

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
	// Realm is the KDC's realm.
	Realm string

	t         testing.TB
	env       []string
	stop      func()
	closeOnce sync.Once
}

// Start starts a KDC for the test's realm, stopped when the test ends, or
// skips the test when MIT Kerberos is not installed.
func Start(t testing.TB) *KDC {
	t.Helper()
	return StartWith(t, Options{})
}

// StartWith is Start with options (Dir and Addr are the test's own).
func StartWith(t testing.TB, opts Options) *KDC {
	t.Helper()
	if err := Missing(); err != nil {
		t.Skipf("%v, or make test", err)
	}
	// One address for UDP and TCP: the KDC listens on both.
	opts.Dir, opts.Addr = t.TempDir(), testaddr.Free(t)
	k, err := StartKDC(context.Background(), opts)
	if errors.Is(err, ErrMissing) {
		t.Skip(err)
	}
	if err != nil {
		t.Fatal(err)
	}
	k.t = t
	t.Cleanup(k.Close)
	return k
}

// AddPrincipal creates principal (without the realm, as alice or
// nn/127.0.0.1) with a random key and writes its keytab, returning the
// keytab's path. It fails the test on error.
func (k *KDC) AddPrincipal(principal string) string {
	k.t.Helper()
	kt, err := k.NewPrincipal(principal)
	if err != nil {
		k.t.Fatal(err)
	}
	return kt
}

// AddServiceKeytab creates principal, as AddPrincipal does, and returns
// its keytab loaded, as a test server that takes Kerberos holds it.
func (k *KDC) AddServiceKeytab(principal string) *keytab.Keytab {
	k.t.Helper()
	kt, err := keytab.Load(k.AddPrincipal(principal))
	if err != nil {
		k.t.Fatal(err)
	}
	return kt
}

// Kinit gets a ticket for principal from its keytab into a new credential
// cache and returns the cache's path, as a user's kinit -kt would. It fails
// the test on error.
func (k *KDC) Kinit(principal, keytab string) string {
	k.t.Helper()
	cc, err := k.TicketCache(principal, keytab)
	if err != nil {
		k.t.Fatal(err)
	}
	return cc
}
