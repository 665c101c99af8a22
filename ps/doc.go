// Package ps holds what Spindle's parameter server and its clients share:
// the consistent-hashing ring that places keys on servers, the table
// specs, and the consistency models.
//
// A job started with spindle submit --num-ps N (and no --ps-command) runs
// N servers (package ps/server) as the ranks of role ps; its workers reach
// them with package ps/client, which routes every key by the ring, or,
// from Python or any other language, through the proxy each worker's
// executor serves on a local socket (package ps/proxy). A table
// is sparse (rows created on first touch, keys hashed over the servers) or
// dense (rows 0..n-1 created at once and split in ranges); the server
// applies the gradients workers push with the table's optimizer, whose
// slots live beside the weights. Consistency is per job: BSP (staleness
// 0), SSP with a bound s, or ASP (no bound), enforced by the servers from
// the workers' clocks.
package ps
