package hadooprpc

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jcmturner/gokrb5/v8/keytab"

	"github.com/spindle-ml/spindle/internal/kerberos"
	"github.com/spindle-ml/spindle/internal/krbtest"
)

// TestKerberos runs SASL GSSAPI between Spindle's client and server with
// tickets from a real MIT KDC: a user logged in with a keytab, and one
// with a ticket cache kinit filled, are both authenticated as themselves.
func TestKerberos(t *testing.T) {
	kdc := krbtest.Start(t)
	t.Setenv("KRB5_CONFIG", kdc.Conf)
	serverKT, err := keytab.Load(kdc.AddPrincipal("rm/127.0.0.1"))
	if err != nil {
		t.Fatal(err)
	}
	aliceKT := kdc.AddPrincipal("alice")
	bobKT := kdc.AddPrincipal("bob")
	addr := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "rm", ServerID: "127.0.0.1"}})

	login := func(o kerberos.Options) *KerberosAuth {
		t.Helper()
		cl, err := kerberos.Login(o)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(cl.Destroy)
		return &KerberosAuth{Client: cl, Principal: "rm/_HOST@" + krbtest.Realm, Host: "127.0.0.1"}
	}
	for name, auth := range map[string]*KerberosAuth{
		"keytab":       login(kerberos.Options{Principal: "alice", Keytab: aliceKT}),
		"ticket cache": login(kerberos.Options{CCache: kdc.Kinit("bob", bobKT)}),
	} {
		t.Run(name, func(t *testing.T) {
			want := map[string]string{"keytab": "alice", "ticket cache": "bob"}[name]
			c := dial(t, addr, ClientConfig{User: want, SASL: *auth})
			resp, err := callFileInfo(c, "/x")
			if err != nil {
				t.Fatal(err)
			}
			if resp.GetFs().GetGroup() != want {
				t.Fatalf("the server authenticated %q, want %q", resp.GetFs().GetGroup(), want)
			}
		})
	}

	t.Run("another server's principal", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		kdc.AddPrincipal("nn/127.0.0.1")
		auth := login(kerberos.Options{Principal: "alice", Keytab: aliceKT})
		auth.Principal = "nn/_HOST@" + krbtest.Realm
		_, err := Dial(ctx, ClientConfig{Addr: addr, User: "alice", Protocol: testProtocol, SASL: *auth})
		if ExceptionClass(err) != ClassAccessControl {
			t.Fatalf("a ticket for another principal: %v, want refused", err)
		}
	})
	t.Run("privacy required", func(t *testing.T) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		strict := startServer(t, ServerConfig{Name: "test", SASL: KerberosServer{Keytab: serverKT, Protocol: "rm", ServerID: "127.0.0.1", qop: qopPrivacy}})
		_, err := Dial(ctx, ClientConfig{Addr: strict, User: "alice", Protocol: testProtocol, SASL: *login(kerberos.Options{Principal: "alice", Keytab: aliceKT})})
		if !errors.Is(err, ErrProtection) || !strings.Contains(err.Error(), "privacy") {
			t.Fatalf("a server that asks for privacy: %v", err)
		}
	})
}

func TestKerberosLoginErrors(t *testing.T) {
	kdc := krbtest.Start(t)
	kt := kdc.AddPrincipal("alice")
	for name, tc := range map[string]struct {
		o    kerberos.Options
		want string
	}{
		"keytab without principal": {kerberos.Options{Conf: kdc.Conf, Keytab: kt}, "without its principal"},
		"principal without keytab": {kerberos.Options{Conf: kdc.Conf, Principal: "alice"}, "without its keytab"},
		"no ticket":                {kerberos.Options{Conf: kdc.Conf, CCache: kdc.Dir + "/no-such-cache"}, "kinit"},
		"wrong realm":              {kerberos.Options{Conf: kdc.Conf, Principal: "alice@NOT.THIS.REALM", Keytab: kt}, "NOT.THIS.REALM"},
		"missing krb5.conf":        {kerberos.Options{Conf: kdc.Dir + "/nope.conf"}, "nope.conf"},
	} {
		t.Run(name, func(t *testing.T) {
			cl, err := kerberos.Login(tc.o)
			if err == nil {
				cl.Destroy()
				t.Fatal("logged in")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
}
