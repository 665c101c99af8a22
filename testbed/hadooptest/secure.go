package hadooptest

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/spindle-ml/spindle/internal/testbin"
	"github.com/spindle-ml/spindle/testbed/krbtest"
)

// SecureUser is the Kerberos user of the secure cluster's tests: it has a
// principal, a keytab and an HDFS home (/user/alice).
const SecureUser = "alice"

// SecureCluster is a Kerberized Hadoop mini cluster and the MIT KDC of its
// realm.
type SecureCluster struct {
	*Cluster
	// KDC is the realm's KDC: KDC.Conf is the krb5.conf (KRB5_CONFIG).
	KDC *krbtest.KDC
	// Principal is the daemons' service principal, with its realm; its
	// short name (hadoop) is HDFS's superuser and YARN's token renewer.
	Principal string
	// UserKeytab holds SecureUser's key.
	UserKeytab string
	// RPCProtection and DataTransferProtection are the cluster's
	// hadoop.rpc.protection and dfs.data.transfer.protection.
	RPCProtection, DataTransferProtection string
}

// SecureRPCProtection is the secure cluster's hadoop.rpc.protection: the
// servers offer privacy and authentication, and each client takes the
// first of its own list they offer: privacy, for Kerberos (the gateway,
// the daemons) and delegation tokens (executors, SASL DIGEST-MD5) alike.
const SecureRPCProtection = "privacy,authentication"

// SecureDataTransferProtection is the secure cluster's
// dfs.data.transfer.protection: datanodes offer every level to connections
// authenticated with block tokens (SASL DIGEST-MD5), and each client takes
// the first of its own list they offer (Spindle) or enforces the highest
// of its list (colinmarc/hdfs's own handshake, which v2.4.0 cannot read
// through at integrity or privacy: its wrapped connection's Read drops the
// bytes it had buffered when a call spans two SASL frames).
const SecureDataTransferProtection = "authentication,integrity,privacy"

// SecureNodeManagerMB is the memory the secure cluster's NodeManager
// offers its containers.
const SecureNodeManagerMB = 8192

// SharedSecure returns the test binary's Kerberized cluster (one datanode,
// one NodeManager), starting it and its KDC on first use: Hadoop's
// daemons log in as hadoop/localhost from a keytab, HDFS has block access
// tokens and SASL data transfer protection with HTTPS-only web endpoints,
// and the ResourceManager and NodeManager take Kerberos. The test skips
// when Java, Maven or MIT Kerberos is missing.
func SharedSecure(t testing.TB) *SecureCluster {
	t.Helper()
	startSecureOnce()
	if secureSkipWhy != "" {
		t.Skip(secureSkipWhy)
	}
	if secureStartErr != nil {
		t.Fatalf("start the secure Hadoop mini cluster: %v", secureStartErr)
	}
	return secure
}

// startSecureOnce starts the secure cluster once; callers after the first
// wait for it.
func startSecureOnce() { secureOnce.Do(func() { secure, secureStartErr = startSecure() }) }

func startSecure() (*SecureCluster, error) {
	if secureSkipWhy = skipReason(); secureSkipWhy != "" {
		return nil, nil
	}
	if err := krbtest.Missing(); err != nil {
		secureSkipWhy = "secure real Hadoop tier skipped: " + err.Error()
		return nil, nil
	}
	script, err := script()
	if err != nil {
		return nil, err
	}
	if secureWorkDir, err = testbin.OwnedDir("spindle-hadoop-secure-"); err != nil {
		return nil, err
	}
	kdir := filepath.Join(secureWorkDir, "kdc")
	if err := os.Mkdir(kdir, 0o700); err != nil {
		return nil, err
	}
	kdc, err := krbtest.StartKDC(context.Background(), krbtest.Options{Dir: kdir})
	if err != nil {
		return nil, fmt.Errorf("start the KDC: %w", err)
	}
	s := &SecureCluster{KDC: kdc, Principal: "hadoop/localhost@" + kdc.Realm,
		RPCProtection: SecureRPCProtection, DataTransferProtection: SecureDataTransferProtection}
	fail := func(err error) (*SecureCluster, error) {
		kdc.Close()
		return nil, err
	}
	serviceKT := filepath.Join(kdir, "hadoop.keytab")
	if err := kdc.AddPrincipals(serviceKT, "hadoop/localhost", "HTTP/localhost"); err != nil {
		return fail(err)
	}
	if s.UserKeytab, err = kdc.NewPrincipal(SecureUser); err != nil {
		return fail(err)
	}
	props := strings.Join([]string{
		"krb5.conf=" + kdc.Conf,
		"principal=" + s.Principal,
		"spnego.principal=HTTP/localhost@" + kdc.Realm,
		"keytab=" + serviceKT,
		"rpc.protection=" + s.RPCProtection,
		"data.transfer.protection=" + s.DataTransferProtection,
		"users=" + SecureUser,
	}, "\n") + "\n"
	propsFile := filepath.Join(secureWorkDir, "secure.properties")
	if err := os.WriteFile(propsFile, []byte(props), 0o600); err != nil {
		return fail(err)
	}
	// Its tests run side by side (t.Parallel): the one NodeManager offers
	// room for two jobs' containers at once (YARN's accounting only; the
	// processes are small), so none waits for another's to end.
	c, err := launch(script, secureWorkDir, []string{"SPINDLE_HADOOP_NM_MEMORY_MB=" + strconv.Itoa(SecureNodeManagerMB)}, "1", "1", propsFile)
	if err != nil {
		return fail(err)
	}
	if c == nil {
		return fail(errors.New("the secure cluster did not start"))
	}
	s.Cluster = c
	return s, nil
}

// Kinit gets SecureUser a ticket with MIT's kinit -kt into a new cache and
// returns the cache's path.
func (s *SecureCluster) Kinit(t testing.TB) string {
	t.Helper()
	cc, err := s.KDC.TicketCache(SecureUser, s.UserKeytab)
	if err != nil {
		t.Fatal(err)
	}
	return cc
}
