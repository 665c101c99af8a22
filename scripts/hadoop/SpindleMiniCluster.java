// SpindleMiniCluster starts Apache Hadoop's own HDFS and YARN mini clusters on
// loopback for Spindle's real-Hadoop test tier, writes the running cluster's
// client configuration (core-site.xml, hdfs-site.xml, yarn-site.xml) into a
// directory, and runs until its standard input closes, so a test process that
// dies takes the cluster with it.
//
// Usage: SpindleMiniCluster WORKDIR CONFDIR DATANODES NODEMANAGERS
import java.io.File;
import java.io.FileOutputStream;
import java.io.OutputStream;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class SpindleMiniCluster {
  public static void main(String[] args) throws Exception {
    if (args.length != 4) {
      System.err.println("usage: SpindleMiniCluster WORKDIR CONFDIR DATANODES NODEMANAGERS");
      System.exit(2);
    }
    File work = new File(args[0]);
    File confDir = new File(args[1]);
    int datanodes = Integer.parseInt(args[2]);
    int nodemanagers = Integer.parseInt(args[3]);

    Configuration conf = new YarnConfiguration();
    conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, new File(work, "dfs").getAbsolutePath());
    conf.set("dfs.namenode.rpc-address", "127.0.0.1:0");
    // Containers here are small processes on a small machine: no memory
    // policing by virtual size, and room for a few containers per node.
    conf.setBoolean("yarn.nodemanager.vmem-check-enabled", false);
    conf.setInt("yarn.nodemanager.resource.memory-mb", 4096);
    conf.setInt("yarn.nodemanager.resource.cpu-vcores", 8);
    conf.setInt("yarn.scheduler.minimum-allocation-mb", 128);
    conf.setInt("yarn.scheduler.maximum-allocation-mb", 4096);
    conf.setInt("yarn.resourcemanager.am.max-attempts", 2);
    conf.setInt("yarn.nodemanager.delete.debug-delay-sec", 0);
    conf.setFloat("yarn.nodemanager.disk-health-checker.max-disk-utilization-per-disk-percentage", 99.0f);
    conf.setInt("yarn.resourcemanager.nodemanagers.heartbeat-interval-ms", 250);
    conf.setInt("yarn.am.liveness-monitor.expiry-interval-ms", 60000);
    conf.set("yarn.resourcemanager.scheduler.class",
        "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler");

    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf).numDataNodes(datanodes).build();
    dfs.waitActive();
    conf.set("fs.defaultFS", dfs.getURI().toString());

    MiniYARNCluster yarn = new MiniYARNCluster("spindle", nodemanagers, 1, 1);
    yarn.init(conf);
    yarn.start();
    if (!yarn.waitForNodeManagersToConnect(60000)) {
      System.err.println("nodemanagers did not register within 60s");
      System.exit(1);
    }
    Configuration out = new Configuration(yarn.getConfig());
    out.set("fs.defaultFS", dfs.getURI().toString());
    confDir.mkdirs();
    for (String name : new String[] {"core-site.xml", "hdfs-site.xml", "yarn-site.xml"}) {
      File tmp = new File(confDir, name + ".tmp");
      try (OutputStream os = new FileOutputStream(tmp)) {
        out.writeXml(os);
      }
      tmp.renameTo(new File(confDir, name));
    }
    System.out.println("spindle-minicluster ready: fs.defaultFS=" + out.get("fs.defaultFS")
        + " yarn.resourcemanager.address=" + out.get("yarn.resourcemanager.address")
        + " yarn.resourcemanager.scheduler.address=" + out.get("yarn.resourcemanager.scheduler.address")
        + " yarn.resourcemanager.webapp.address=" + out.get("yarn.resourcemanager.webapp.address"));
    System.out.flush();

    // Run until the parent closes our standard input (or dies).
    while (System.in.read() >= 0) {
    }
    yarn.stop();
    dfs.shutdown();
    System.exit(0);
  }
}
