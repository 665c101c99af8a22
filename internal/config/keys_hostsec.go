package config

// Names of the keys that keep hosts safe from what a job ships, and a
// job's secrets from the network.
const (
	KeyArchivesMaxBytes        = "spindle.archives.maxBytes"
	KeyArchivesMaxEntries      = "spindle.archives.maxEntries"
	KeyClusterPlaintextSecrets = "spindle.cluster.plaintextSecrets"
	KeyFlightTokenHosts        = "spindle.flight.tokenHosts"
	KeyUIBindHost              = "spindle.ui.bindHost"
	KeyUIToken                 = "spindle.ui.token"
)

// archiveKeys bound --archives unpacking, so that a zip or gzip bomb
// fails with an error naming the archive and the entry instead of
// filling the disk.
var archiveKeys = []Key{
	{Name: KeyArchivesMaxBytes, Default: "32g", Kind: Bytes, Min: 1 << 20, HasMin: true,
		Doc: "Most bytes the regular files of one --archives archive may unpack to on an executor's host; past it the job fails naming the archive and the entry."},
	{Name: KeyArchivesMaxEntries, Default: "1000000", Kind: Int, Min: 1, HasMin: true,
		Doc: "Most entries (files, directories, links) one --archives archive may hold; past it the job fails naming the archive and the entry."},
	{Name: KeyClusterPlaintextSecrets, Default: "false", Kind: Bool, ReadBy: ReadBySubmit | ReadByMaster,
		Doc: "Let submit send a job's secret, TLS bundle and delegation tokens to standalone masters on other hosts without cluster TLS (spindle.cluster.tls.*), and delegation tokens (spindle.security.tokens.renew) to executors there without job TLS (spindle.job.tls.enabled), where anyone on the network can read them; submit warns. On masters: let launches carry them to workers on other hosts without cluster TLS. Off: such a submit or launch is refused. Loopback needs neither."},
	{Name: KeyFlightTokenHosts, Default: "", Kind: List, ReadBy: ReadBySubmit,
		Doc: "Hosts besides those the grpc:// inputs name that spindle.flight.token is sent to when a flight's endpoints name them, comma-separated; * is every host. Empty: an endpoint on another host is read without the token."},
	{Name: KeyUIBindHost, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "Address the driver's web UI and /metrics listen on; empty: the driver's listen address (spindle.driver.bindHost). 127.0.0.1 keeps them to the submit host."},
	{Name: KeyUIToken, Default: "false", Kind: Bool, ReadBy: ReadBySubmit,
		Doc: "Require an access token, made per job, for the driver's web UI and /metrics: submit prints the link with it on the console (never in a log); without it the UI answers 401. YARN's proxy link and spindle status do not carry it."},
}
