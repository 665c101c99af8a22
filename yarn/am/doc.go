// Package am is Spindle's YARN ApplicationMaster: the part of the `spindle`
// binary that runs in the AM container. Allocator implements the driver's
// ClusterManager over ApplicationMasterProtocol (register, the allocate
// heartbeat with progress, finish) and ContainerManagementProtocol (start
// and stop containers on NodeManagers with their NMTokens), authenticating
// with the AMRMToken from the container's credentials. A gang of executors
// is acquired all or nothing: containers are held until every one is
// granted, and everything held is released when the gang times out, so a
// partial gang never blocks the queue. Completed containers become driver
// events whose messages name the executor, host, container and YARN's reason
// (preempted, killed for memory, disks failed, node lost).
package am
