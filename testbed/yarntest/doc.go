// Package yarntest is a protocol-level YARN for tests and local demos: a
// ResourceManager and several NodeManagers in one process that speak
// Hadoop RPC (internal/hadoop/hadooprpc) with Hadoop's published protobuf
// messages, so Spindle's real YARN client, ApplicationMaster and
// `spindle submit --master yarn` run against it unchanged. It is what
// `spindle minicluster` starts beside the test HDFS (testbed/hdfstest),
// for users without Java.
//
// The ResourceManager serves ApplicationClientProtocol on its client port
// (getNewApplication, submitApplication, getApplicationReport,
// forceKillApplication, getClusterMetrics, getQueueInfo, getClusterNodes,
// getApplications) and ApplicationMasterProtocol on its scheduler port
// (registerApplicationMaster, allocate, finishApplicationMaster), which
// takes AMRMTokens only (SASL DIGEST-MD5), even with simple authentication
// on the client port. With Config.ClientSASL (hadooprpc.KerberosServer)
// and Config.Principal the client port takes Kerberos instead, as a secure
// ResourceManager's does, and NodeManagers localize a container's hdfs://
// files with the delegation tokens of its launch context (the test HDFS in
// Kerberos mode): spindle minicluster --secure. Each NodeManager serves ContainerManagementProtocol
// (startContainers, stopContainers, getContainerStatuses) to NMTokens, and
// checks every container token against the container it names. Tokens are
// signed with master keys that roll (RollMasterKeys) and expire
// (ExpireOldKeys); rolled AMRMTokens and NMTokens reach the AM in its
// allocate answers, as in YARN.
//
// Containers are local processes: each gets a working directory with its
// LocalResources (from the test HDFS, hdfs://, or local paths, refused when
// their timestamp changed), its credentials file
// ($HADOOP_TOKEN_FILE_LOCATION; the AM's carries its AMRMToken), YARN's
// environment (CONTAINER_ID, NM_HOST, LOCAL_DIRS, LOG_DIRS, ...) and a
// launch_container.sh that exports the launch context's environment and
// runs its command, with <LOG_DIR> and {{VAR}} expanded. An AM that exits
// before unregistering fails its attempt; YARN starts another up to the
// application's maxAppAttempts, then fails the application with the tail
// of the AM's stderr in the diagnostics.
//
// With Config.Launcher the containers are simulated in this process
// instead (Launch gets the launch context's environment, and an AM's its
// AMRMToken), each after Config.StartLatency, and Config.GrantsPerNode
// limits what each node grants per allocate call, so thousands of
// containers on hundreds of NodeManagers fit on one machine
// (testbed/scaletest's RunYARN).
//
// The scheduler fills asks for any host ("*") on the node with the most
// free memory, within the queue's limits, when the AM's allocate call
// arrives; with Config.NodeHeartbeat, as YARN's schedulers do, only on
// each node's heartbeat and on that node, so an allocate call hands out
// what the nodes granted since the last one. Node and rack asks are
// accepted and ignored. There is no web UI: the tracking URL reported is the one
// the AM registered, unproxied.
//
// With Config.ClientSASL (a hadooprpc.KerberosServer) the client port
// takes Kerberos, as a secure cluster's does, and submitters pass the
// HDFS delegation tokens of their applications in the AM's launch
// context as on YARN; the ResourceManager does not renew them, as YARN's
// DelegationTokenRenewer would, and the NodeManagers localize with the
// ticket of the process running the cluster.
//
// Tests break the cluster on purpose, with the statuses YARN reports:
// Preempt (-102), KillForMemory (-104 physical, -103 virtual), FailDisks
// (-101, the node turns UNHEALTHY), LoseNode (-100 "released on a *lost*
// node", the node LOST in allocate's updated nodes), KillContainer (the
// process's own 137), SetQueueLimit (a queue that never has room), and
// WrongTokens (AMRMTokens or NMTokens the servers refuse).
//
// Each behaviour it imitates is one the real Hadoop mini cluster shows in
// Spindle's yarn/e2e tier, where that tier can produce it: an application
// runs to FINISHED/SUCCEEDED with its name, type, queue and tags
// (TestClientModeLogReg); a gang that cannot fit times out and the queue's
// room is explained from getQueueInfo (TestGangTimeout); an executor
// killed inside its container is reported with its exit status
// (TestContainerKilled); forceKillApplication ends the application KILLED
// (TestInterrupted, TestStatusAndKill). Preemption, lost nodes, failed
// disks, memory kills and refused tokens cannot be produced on demand
// there; their statuses and diagnostics follow Hadoop's
// ContainerExitStatus and the messages its ResourceManager and
// NodeManagers write.
package yarntest
