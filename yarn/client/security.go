package client

import (
	"fmt"
	"strings"

	krbclient "github.com/jcmturner/gokrb5/v8/client"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// Security is what a Hadoop configuration says about the cluster's
// security.
type Security struct {
	// Kerberos: hadoop.security.authentication is kerberos.
	Kerberos bool
	// RMPrincipal is yarn.resourcemanager.principal (rm/_HOST@REALM);
	// _HOST becomes each ResourceManager's host as the configuration
	// names it.
	RMPrincipal string
	// Protection is hadoop.rpc.protection.
	Protection string
}

// Security reads the cluster's security settings. On a Kerberized
// cluster yarn.resourcemanager.principal must be set, and
// hadoop.rpc.protection must parse.
func (c *Conf) Security() (Security, error) {
	s := Security{
		Kerberos:    strings.EqualFold(c.Get("hadoop.security.authentication", "simple"), "kerberos"),
		RMPrincipal: c.Get("yarn.resourcemanager.principal", ""),
		Protection:  c.Get("hadoop.rpc.protection", ""),
	}
	if _, err := hadooprpc.ParseProtection(s.Protection); err != nil {
		return s, fmt.Errorf("%w: %v (%s)", ErrConfig, err, c.where())
	}
	if s.Kerberos && s.RMPrincipal == "" {
		return s, fmt.Errorf("%w: hadoop.security.authentication is kerberos but yarn.resourcemanager.principal is not set (%s)", ErrConfig, c.where())
	}
	return s, nil
}

// RMAuth is the SASL authentication to the ResourceManagers for a
// Kerberos login: GSSAPI with a ticket for yarn.resourcemanager.principal,
// at hadoop.rpc.protection.
func (s Security) RMAuth(login *krbclient.Client) hadooprpc.ClientSASL {
	return hadooprpc.KerberosAuth{Client: login, Principal: s.RMPrincipal, Protection: s.Protection}
}

// Renewer is the renewer to name in delegation tokens handed to YARN: the
// short name of the ResourceManager's principal (rm for
// rm/_HOST@REALM), as Hadoop's auth_to_local maps it by default.
func (s Security) Renewer() string {
	name, _, _ := strings.Cut(s.RMPrincipal, "@")
	name, _, _ = strings.Cut(name, "/")
	return name
}
