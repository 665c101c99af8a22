// Package tokenkeeper keeps a job's HDFS delegation tokens for its
// executors alive on a Kerberized cluster: the driver, which holds the
// login, renews each token before three quarters of the time to its
// expiry, up to its maximum lifetime; with a keytab it logs in again and
// obtains fresh tokens before three quarters of that lifetime, hands them
// to the executors (driver.CredentialKeeper: at registration and in
// heartbeat answers), and cancels the older ones once every running
// executor uses the new ones. The YARN and standalone cluster managers
// use it.
package tokenkeeper
