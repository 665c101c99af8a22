// Package chaos is Spindle's chaos harness: it runs real jobs on this
// machine (loopback only; in local mode, on a standalone cluster of three
// masters and two workers run as processes, and on the protocol-level test
// HDFS and YARN of testbed/hdfstest and testbed/yarntest) and kills one
// of their processes or cluster members at a random moment — a training
// rank (Go or PyTorch DDP), an executor, a parameter server, the driver, a
// standalone worker, the leading or a following master, a datanode, a YARN
// container or NodeManager — then checks that the job recovered as its
// failure policy promises (or failed naming what went), that its model is
// as good as an undisturbed run's or its rows fed once per epoch, that no
// process was left behind, and that nothing hung past a hard deadline. It
// reports runs, faults by kind, recoveries, restarts, named failures,
// hangs and the recovery times.
//
// Network faults go through testbed/faultproxy: the executors reach the
// driver through a proxy that pauses, drops or blackholes their
// connections for a while, and (e2e/linkfault) the two training processes
// of a job reach each other through proxies that delay, lose, or cut one
// way or both the bytes between them. The real-Hadoop faults stop a
// datanode or a NodeManager of Apache Hadoop's own mini cluster
// (testbed/hadooptest) through its launcher's control commands.
//
// It runs only when SPINDLE_CHAOS=1 (make chaos): it takes minutes, and
// its figures go to docs/reliability.md. SPINDLE_CHAOS_RUNS sets the runs
// per fault (3), SPINDLE_CHAOS_SEED the seed of the random choices and
// SPINDLE_CHAOS_ONLY runs only the faults whose names contain it.
package chaos
