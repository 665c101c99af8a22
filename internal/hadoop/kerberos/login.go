package kerberos

import (
	"errors"
	"fmt"
	"os"
	"strings"

	krbclient "github.com/jcmturner/gokrb5/v8/client"
	"github.com/jcmturner/gokrb5/v8/config"
	"github.com/jcmturner/gokrb5/v8/credentials"
	"github.com/jcmturner/gokrb5/v8/keytab"
)

// ErrNoLogin means there is neither a ticket cache nor a keytab to log in
// with.
var ErrNoLogin = errors.New("kerberos: no ticket (run kinit) and no keytab (give --principal and --keytab)")

// Options say how to log in. Empty fields take the environment's values.
type Options struct {
	// Conf is krb5.conf; empty means $KRB5_CONFIG, else /etc/krb5.conf.
	Conf string
	// Principal and Keytab log in with a keytab (both or neither):
	// alice@REALM or alice (the default realm).
	Principal, Keytab string
	// CCache is the ticket cache; empty means $KRB5CCNAME, else
	// /tmp/krb5cc_UID, as kinit writes it.
	CCache string
}

// ConfPath is the krb5.conf Login reads: conf, else the first file of
// $KRB5_CONFIG, else /etc/krb5.conf.
func ConfPath(conf string) string {
	// KRB5_CONFIG may list several files; the first is read.
	p, _, _ := strings.Cut(firstOf(conf, os.Getenv("KRB5_CONFIG"), "/etc/krb5.conf"), ":")
	return p
}

// Login returns a logged-in client. The caller calls Destroy when done.
func Login(o Options) (*krbclient.Client, error) {
	confPath := ConfPath(o.Conf)
	switch {
	case o.Keytab != "" && o.Principal == "":
		return nil, fmt.Errorf("kerberos: keytab %s given without its principal (--principal)", o.Keytab)
	case o.Principal != "" && o.Keytab == "":
		return nil, fmt.Errorf("kerberos: principal %s given without its keytab (--keytab)", o.Principal)
	}
	conf, err := config.Load(confPath)
	if err != nil {
		return nil, fmt.Errorf("kerberos: read %s (KRB5_CONFIG): %w", confPath, err)
	}
	if o.Keytab != "" {
		kt, err := keytab.Load(o.Keytab)
		if err != nil {
			return nil, fmt.Errorf("kerberos: read keytab %s: %w", o.Keytab, err)
		}
		user, realm, _ := strings.Cut(o.Principal, "@")
		if realm == "" {
			realm = conf.LibDefaults.DefaultRealm
		}
		if realm == "" {
			return nil, fmt.Errorf("kerberos: principal %s names no realm and %s has no default_realm", o.Principal, confPath)
		}
		cl := krbclient.NewWithKeytab(user, realm, kt, conf, krbclient.DisablePAFXFAST(true))
		if err := cl.Login(); err != nil {
			return nil, fmt.Errorf("kerberos: log in as %s@%s with keytab %s (KDCs of %s in %s): %w", user, realm, o.Keytab, realm, confPath, err)
		}
		return cl, nil
	}
	ccPath := firstOf(o.CCache, os.Getenv("KRB5CCNAME"), fmt.Sprintf("/tmp/krb5cc_%d", os.Getuid()))
	ccPath = strings.TrimPrefix(ccPath, "FILE:")
	if _, err := os.Stat(ccPath); err != nil {
		return nil, fmt.Errorf("%w: no ticket cache at %s", ErrNoLogin, ccPath)
	}
	cc, err := credentials.LoadCCache(ccPath)
	if err != nil {
		return nil, fmt.Errorf("kerberos: read ticket cache %s: %w", ccPath, err)
	}
	cl, err := krbclient.NewFromCCache(cc, conf, krbclient.DisablePAFXFAST(true))
	if err != nil {
		return nil, fmt.Errorf("kerberos: ticket cache %s: %w (run kinit again)", ccPath, err)
	}
	return cl, nil
}

func firstOf(xs ...string) string {
	for _, x := range xs {
		if x != "" {
			return x
		}
	}
	return ""
}
