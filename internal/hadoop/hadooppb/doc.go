// Package hadooppb holds the subset of Hadoop's protocol buffer definitions
// that Spindle's Hadoop RPC machinery and test servers speak: the IPC framing
// headers, the HDFS client-namenode protocol, the datanode data-transfer
// protocol, Hadoop credentials, and the three YARN protocols (client to
// ResourceManager, ApplicationMaster to ResourceManager, ApplicationMaster to
// NodeManager). The .proto files keep Hadoop's field numbers and labels, so the
// bytes on the wire are Hadoop's, under a proto package of Spindle's own so
// the types coexist with other Go copies of the same definitions.
//
// Regenerate the Go code with `go generate ./internal/hadoop/hadooppb`.
package hadooppb

//go:generate ../../../scripts/protoc.sh
