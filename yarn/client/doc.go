// Package client speaks YARN's ApplicationClientProtocol to the
// ResourceManager over Hadoop RPC, the protocol the yarn command and
// spark-submit use: new application ids, submission, reports, kills, and the
// cluster and queue figures that explain a refusal. It follows the
// ResourceManagers of an HA pair (yarn.resourcemanager.ha.rm-ids) across
// StandbyException, and reads the Hadoop client configuration
// (core-site.xml, hdfs-site.xml, yarn-site.xml in HADOOP_CONF_DIR).
package client
