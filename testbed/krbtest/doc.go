// Package krbtest runs a real MIT Kerberos KDC for tests: a throwaway
// realm in a temporary directory, listening on loopback, with principals
// and keytabs made on demand, and a krb5.conf that points at it.
//
// It needs Debian's krb5-kdc and krb5-admin-server (make test installs
// them); without them Start skips the test, saying so. StartKDC starts one
// without a test, for a test binary's shared cluster and for spindle
// minicluster --secure, whose error then names the missing program.
package krbtest
