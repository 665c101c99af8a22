// Package kerberos logs a user in to Kerberos the way Hadoop's clients
// and spark-submit do: from a principal and its keytab (--principal,
// --keytab), or from the ticket cache kinit filled (KRB5CCNAME), with
// krb5.conf from KRB5_CONFIG or /etc/krb5.conf. The client it returns
// authenticates Spindle's Hadoop RPC (package hadooprpc's KerberosAuth).
package kerberos
