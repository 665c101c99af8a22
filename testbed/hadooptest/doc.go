// Package hadooptest runs real Apache Hadoop for tests: Hadoop's own
// MiniDFSCluster and MiniYARNCluster (3 datanodes, 3 nodemanagers by
// default) on loopback, started through scripts/hadoop-minicluster.sh, which
// fetches Hadoop from Maven Central into ~/.m2 on first use. One cluster
// serves every test of a test binary; it stops when the binary exits (its
// launcher ends when its standard input closes). Tests skip, saying why,
// only when Java or Maven is missing.
//
// SharedSecure starts a second, Kerberized cluster (one datanode, one
// NodeManager) and a real MIT KDC for it (testbed/krbtest): Hadoop's
// daemons log in from a keytab made in that KDC, HDFS has block access
// tokens and SASL data transfer protection, and YARN takes Kerberos. Its
// tests skip also when MIT Kerberos is not installed.
package hadooptest
