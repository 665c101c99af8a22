package config

// Names of the keys of Kerberized Hadoop clusters.
const (
	KeyKerberosPrincipal = "spindle.kerberos.principal"
	KeyKerberosKeytab    = "spindle.kerberos.keytab"
	KeyTokensRenew       = "spindle.security.tokens.renew"
)

// kerberosKeys log a job in to a Kerberized Hadoop cluster.
var kerberosKeys = []Key{
	{Name: KeyKerberosPrincipal, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "Kerberos principal to log in as on a Kerberized Hadoop cluster (hadoop.security.authentication kerberos), with spindle.kerberos.keytab (spark-submit's --principal); empty uses the ticket cache kinit filled (KRB5CCNAME). krb5.conf comes from KRB5_CONFIG or /etc/krb5.conf."},
	{Name: KeyKerberosKeytab, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "Keytab of spindle.kerberos.principal (spark-submit's --keytab); readable by the submitting user only."},
	{Name: KeyTokensRenew, Default: "true", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "On a Kerberized Hadoop cluster, the driver obtains HDFS delegation tokens for the executors (YARN containers and standalone workers) and keeps them alive: it renews them before each renewal deadline up to their maximum lifetime and, with spindle.kerberos.keytab, logs in again and sends running executors fresh tokens before three quarters of it. false leaves YARN executors the tokens YARN launched them with, and standalone executors none."},
}
