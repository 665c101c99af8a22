// Package hdfstest is a protocol-level HDFS for tests and local demos: a
// namenode and several datanodes in one process that speak Hadoop RPC
// (protobuf, IPC version 9) and the data-transfer protocol, so the real
// third-party HDFS client (github.com/colinmarc/hdfs/v2) reads and writes
// through it unchanged.
//
// The namenode keeps the namespace in memory (saved to Dir as a JSON image)
// with POSIX-style permissions checked against the caller's user, leases,
// block placement on distinct datanodes, and HDFS's exceptions (not found,
// exists, permission denied, ...). Several namenode endpoints form an HA
// nameservice whose standbys answer StandbyException. Each datanode keeps
// replicas as block and checksum files (CRC32C per 512-byte chunk), serves
// reads in packets, and receives writes through replication pipelines
// with per-packet acknowledgements.
//
// Tests break the cluster on purpose: KillDataNode drops a datanode
// mid-stream, CorruptBlock flips bytes under a replica's checksums, and
// Stats counts namenode calls and datanode operations so benchmarks can
// report round trips.
//
// Authentication is "simple", or with Config.SASL Kerberos (and with
// Config.TokenRenewInterval delegation tokens: issued, renewed, cancelled,
// and accepted over SASL DIGEST-MD5, at the Kerberos server's
// hadoop.rpc.protection). With Config.DataTransferProtection the namenode
// signs block tokens and the datanodes require the data-transfer SASL
// handshake (dfs.data.transfer.protection, and AES-CTR after it with
// Config.DataTransferCipherSuites), checking each operation's token;
// without it block tokens are empty. Appends are refused.
package hdfstest
