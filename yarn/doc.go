// Package yarn runs Spindle jobs on an existing Hadoop YARN cluster, the way
// Hadoop's own clients do: ApplicationClientProtocol over Hadoop RPC to the
// ResourceManager (package client), Spindle's own ApplicationMaster in Go
// (package am), the spindle binary kept by content in a cache on HDFS
// (hdfs:///user/<user>/.spindle/cache/<sha256>/spindle, a PRIVATE
// LocalResource that NodeManagers localize once per user) and shipped files
// staged to hdfs:///user/<user>/.spindleStaging/<appId>/, and secrets
// carried only in the launch contexts' credentials.
//
// ClusterManager is the driver-side cluster manager of client mode: the
// driver runs in `spindle submit`, a thin ApplicationMaster in the cluster
// gets containers and starts executors in them, and the two talk over a
// small authenticated HTTP API the AM registers with YARN. In cluster mode
// (SubmitCluster) the driver runs inside the ApplicationMaster, with the
// AM's allocator as its cluster manager, and App.Follow streams its output
// to the gateway over the same API until the job's result. RunAM is the
// ApplicationMaster's main (`spindle yarn-am`), RunContainer the wrapper
// that starts an executor inside its container (`spindle yarn-container`).
package yarn
