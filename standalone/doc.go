// Package standalone is Spindle's own cluster manager, for teams without
// YARN or with a dedicated training pool: `spindle master` daemons (three
// or five, a Raft group with no single point of failure and no ZooKeeper)
// keep the cluster state, and `spindle worker` daemons run executors.
//
// This package is what a driver uses: NewClusterManager returns a
// driver.ClusterManager that registers the job as an application with the
// masters given by --master spindle://m1:7077,m2:7077,m3:7077, asks for
// gangs of executors (all or nothing, first come first served, spread or
// packed), keeps the application alive and turns the masters' view of its
// executors into driver events: started, exited, lost (naming the worker
// and host).
//
// The rooms below: master (Raft state machine, placement, the gRPC API),
// worker (the node agent that launches executors in cgroups), client (the
// masters' client used by workers, drivers and spindle status/kill).
package standalone
