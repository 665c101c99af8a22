// SpindleMiniCluster starts Apache Hadoop's own HDFS and YARN mini clusters on
// loopback for Spindle's real-Hadoop test tier, writes the running cluster's
// client configuration (core-site.xml, hdfs-site.xml, yarn-site.xml) into a
// directory, and runs until its standard input closes, so a test process that
// dies takes the cluster with it.
//
// Usage: SpindleMiniCluster WORKDIR CONFDIR DATANODES NODEMANAGERS [SECURE_PROPERTIES]
//
// With SECURE_PROPERTIES (a Java properties file) the cluster runs in
// Kerberos mode, as Hadoop's own secure mini cluster tests set it up: every
// daemon logs in as one service principal from a keytab made in the caller's
// KDC, HDFS hands out block access tokens and protects data transfer with
// SASL (dfs.data.transfer.protection), which with dfs.http.policy
// HTTPS_ONLY (keystores generated here) is what lets a secure DataNode run
// without privileged ports, and YARN's ResourceManager and NodeManagers
// take Kerberos. Its keys:
//   krb5.conf                  the realm's krb5.conf
//   principal                  the daemons' principal, with its realm
//   spnego.principal           HTTP/host@REALM for the web endpoints
//   keytab                     a keytab holding both
//   rpc.protection             hadoop.rpc.protection
//   data.transfer.protection   dfs.data.transfer.protection
//   users                      comma-separated users given an HDFS home
import java.io.File;
import java.io.FileInputStream;
import java.io.FileOutputStream;
import java.io.InputStream;
import java.io.OutputStream;
import java.util.Properties;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.FileSystem;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.security.UserGroupInformation;
import org.apache.hadoop.security.ssl.KeyStoreTestUtil;
import org.apache.hadoop.hdfs.MiniDFSCluster;
import org.apache.hadoop.yarn.conf.YarnConfiguration;
import org.apache.hadoop.yarn.server.MiniYARNCluster;

public class SpindleMiniCluster {
  public static void main(String[] args) throws Exception {
    if (args.length != 4 && args.length != 5) {
      System.err.println("usage: SpindleMiniCluster WORKDIR CONFDIR DATANODES NODEMANAGERS [SECURE_PROPERTIES]");
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
    // An ApplicationMaster has 5 minutes (Hadoop's default is 10) to
    // register and heartbeat: at 1 minute, Spark's AM, a JVM loading
    // Spark's jars, missed it in both attempts on a machine running a
    // second make test beside (load 70-100), and the Spark test failed.
    conf.setInt("yarn.am.liveness-monitor.expiry-interval-ms", 300000);
    conf.set("yarn.resourcemanager.scheduler.class",
        "org.apache.hadoop.yarn.server.resourcemanager.scheduler.capacity.CapacityScheduler");
    // The tests run several applications side by side: let ApplicationMasters
    // take half of the queue (the default 10% admits about four at once and
    // leaves the next submissions ACCEPTED, waiting for one to end).
    conf.setFloat("yarn.scheduler.capacity.maximum-am-resource-percent", 0.5f);

    Properties secure = null;
    if (args.length == 5) {
      secure = new Properties();
      try (InputStream in = new FileInputStream(args[4])) {
        secure.load(in);
      }
      secureConf(conf, secure, work);
    }

    MiniDFSCluster dfs = new MiniDFSCluster.Builder(conf).numDataNodes(datanodes).build();
    dfs.waitActive();
    conf.set("fs.defaultFS", dfs.getURI().toString());
    if (secure != null) {
      // The daemons' principal is HDFS's superuser: it makes the users'
      // homes and a world-writable /tmp, as an administrator would.
      FileSystem fs = dfs.getFileSystem();
      fs.mkdirs(new Path("/tmp"));
      fs.setPermission(new Path("/tmp"), new FsPermission((short) 01777));
      for (String user : secure.getProperty("users", "").split(",")) {
        user = user.trim();
        if (user.isEmpty()) {
          continue;
        }
        Path home = new Path("/user/" + user);
        fs.mkdirs(home);
        fs.setOwner(home, user, user);
      }
    }

    // A NodeManager that stops is lost to the ResourceManager after 10 s
    // (Hadoop's default is 10 minutes), so that a fault test that stops
    // one sees its containers reported lost while the job runs.
    conf.setLong("yarn.nm.liveness-monitor.expiry-interval-ms", 10000);
    // SPINDLE_HADOOP_NM_MEMORY_MB gives each NodeManager that much memory
    // (and containers a 128 MiB granularity), so a small job's containers
    // spread over several of them.
    String nmMemory = System.getenv("SPINDLE_HADOOP_NM_MEMORY_MB");
    if (nmMemory != null && !nmMemory.isEmpty()) {
      conf.setInt("yarn.nodemanager.resource.memory-mb", Integer.parseInt(nmMemory));
      conf.setInt("yarn.scheduler.minimum-allocation-mb", 128);
    }
    // Containers get the launcher's TMPDIR (a test process's own
    // directory, removed after its tests), so what their processes leave
    // in a temporary directory (a killed executor's socket directory)
    // goes with it instead of piling up in /tmp.
    String tmpdir = System.getenv("TMPDIR");
    if (tmpdir != null && !tmpdir.isEmpty()) {
      conf.set("yarn.nodemanager.admin-env", "MALLOC_ARENA_MAX=$MALLOC_ARENA_MAX,TMPDIR=" + tmpdir);
    }
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

    // Run until the parent closes our standard input (or dies), taking
    // commands from it, one a line, for fault tests; each is answered
    // with a "spindle-minicluster did: " or "spindle-minicluster failed: "
    // line on standard output.
    control(dfs, yarn, nodemanagers);
    stopNodeManagers(yarn, nodemanagers);
    yarn.stop();
    dfs.shutdown();
    System.exit(0);
  }

  // stopNodeManagers stops the NodeManagers side by side. Each one's stop
  // waits for the applications it still lists, which without log
  // aggregation are all it ever ran (they go when their logs are deleted,
  // hours later): about 7 s each (yarn.nodemanager.sleep-delay-before-sigkill.ms,
  // process-kill-wait.ms and a second). MiniYARNCluster's own stop takes them
  // one after another, 21 s of three, most of the 30 s the test process
  // gives the launcher before it kills it. A NodeManager already stopped
  // (stop-nodemanager) stays stopped.
  static void stopNodeManagers(MiniYARNCluster yarn, int nodemanagers) throws InterruptedException {
    Thread[] stops = new Thread[nodemanagers];
    for (int i = 0; i < nodemanagers; i++) {
      org.apache.hadoop.yarn.server.nodemanager.NodeManager nm = yarn.getNodeManager(i);
      stops[i] = new Thread(nm::stop, "stop-nodemanager-" + i);
      stops[i].start();
    }
    for (Thread t : stops) {
      t.join();
    }
  }

  // control reads commands until standard input closes:
  //   stop-datanode N        stops datanode N as a crash would (its port closes)
  //   restart-datanode N     starts datanode N again, on its old ports and storage
  //   stop-nodemanager N     stops NodeManager N, and its containers with it
  //   nodemanagers           answers "N:CONTAINERS" (":am" when one is an
  //                          ApplicationMaster's, "N:down" when stopped) per NodeManager
  static void control(MiniDFSCluster dfs, MiniYARNCluster yarn, int nodemanagers) throws Exception {
    java.io.BufferedReader in = new java.io.BufferedReader(new java.io.InputStreamReader(System.in));
    java.util.Map<Integer, MiniDFSCluster.DataNodeProperties> stopped = new java.util.HashMap<>();
    for (String line; (line = in.readLine()) != null; ) {
      String[] f = line.trim().split("\\s+");
      if (f.length == 1 && f[0].equals("nodemanagers")) {
        StringBuilder sb = new StringBuilder();
        for (int i = 0; i < nodemanagers; i++) {
          org.apache.hadoop.yarn.server.nodemanager.NodeManager nm = yarn.getNodeManager(i);
          if (nm.getServiceState() != org.apache.hadoop.service.Service.STATE.STARTED) {
            sb.append(" ").append(i).append(":down");
            continue;
          }
          int running = 0;
          boolean am = false;
          for (org.apache.hadoop.yarn.api.records.ContainerId id : nm.getNMContext().getContainers().keySet()) {
            running++;
            // An attempt's first container is its ApplicationMaster's.
            am |= (id.getContainerId() & 0xffffffffffL) == 1;
          }
          sb.append(" ").append(i).append(":").append(running).append(am ? ":am" : "");
        }
        System.out.println("spindle-minicluster did: nodemanagers" + sb);
        System.out.flush();
        continue;
      }
      if (f.length != 2) {
        continue;
      }
      try {
        int n = Integer.parseInt(f[1]);
        switch (f[0]) {
          case "stop-datanode":
            MiniDFSCluster.DataNodeProperties gone = dfs.stopDataNode(n);
            if (gone == null) {
              throw new IllegalArgumentException("no running datanode " + n);
            }
            stopped.put(n, gone);
            break;
          case "restart-datanode":
            MiniDFSCluster.DataNodeProperties dn = stopped.remove(n);
            if (dn == null) {
              throw new IllegalStateException("datanode " + n + " is not stopped");
            }
            // stopDataNode takes the datanode out of the list: it comes
            // back at the end.
            dfs.restartDataNode(dn, true);
            dfs.waitActive();
            break;
          case "stop-nodemanager":
            yarn.getNodeManager(n).stop();
            break;
          default:
            throw new IllegalArgumentException("unknown command " + f[0]);
        }
        System.out.println("spindle-minicluster did: " + line.trim());
      } catch (Exception e) {
        System.out.println("spindle-minicluster failed: " + line.trim() + ": " + e);
      }
      System.out.flush();
    }
  }

  // secureConf turns Kerberos on in conf and logs this JVM in as the
  // daemons' principal.
  static void secureConf(Configuration conf, Properties p, File work) throws Exception {
    System.setProperty("java.security.krb5.conf", p.getProperty("krb5.conf"));
    String principal = p.getProperty("principal");
    String spnego = p.getProperty("spnego.principal");
    String keytab = p.getProperty("keytab");
    conf.set("hadoop.security.authentication", "kerberos");
    conf.set("hadoop.rpc.protection", p.getProperty("rpc.protection", "authentication"));
    conf.set("dfs.namenode.kerberos.principal", principal);
    conf.set("dfs.namenode.keytab.file", keytab);
    conf.set("dfs.datanode.kerberos.principal", principal);
    conf.set("dfs.datanode.keytab.file", keytab);
    conf.set("dfs.web.authentication.kerberos.principal", spnego);
    conf.set("dfs.web.authentication.kerberos.keytab", keytab);
    conf.setBoolean("dfs.block.access.token.enable", true);
    conf.set("dfs.data.transfer.protection", p.getProperty("data.transfer.protection", "authentication"));
    conf.set("dfs.http.policy", "HTTPS_ONLY");
    conf.set("dfs.namenode.https-address", "localhost:0");
    conf.set("dfs.datanode.https.address", "localhost:0");
    // The keystores and ssl-{server,client}.xml: the launcher puts
    // WORKDIR/ssl on the classpath, where Hadoop looks for them.
    File ssl = new File(work, "ssl");
    ssl.mkdirs();
    KeyStoreTestUtil.setupSSLConfig(ssl.getAbsolutePath(), ssl.getAbsolutePath(), conf, false);
    conf.set("dfs.client.https.keystore.resource", KeyStoreTestUtil.getClientSSLConfigFileName());
    conf.set("dfs.server.https.keystore.resource", KeyStoreTestUtil.getServerSSLConfigFileName());
    conf.set("yarn.resourcemanager.principal", principal);
    conf.set("yarn.resourcemanager.keytab", keytab);
    conf.set("yarn.nodemanager.principal", principal);
    conf.set("yarn.nodemanager.keytab", keytab);
    // Some daemons' clients start from a new Configuration (the
    // NodeManager's localizer reading the application's files from HDFS):
    // the security settings go to a core-site.xml on the classpath too,
    // so every Configuration in this JVM has them.
    Configuration site = new Configuration(false);
    for (String key : new String[] {"hadoop.security.authentication", "hadoop.rpc.protection",
        "dfs.namenode.kerberos.principal", "dfs.datanode.kerberos.principal", "dfs.web.authentication.kerberos.principal",
        "dfs.block.access.token.enable", "dfs.data.transfer.protection", "dfs.http.policy",
        "dfs.client.https.keystore.resource", "dfs.server.https.keystore.resource",
        "yarn.resourcemanager.principal", "yarn.nodemanager.principal"}) {
      site.set(key, conf.get(key));
    }
    try (OutputStream os = new FileOutputStream(new File(ssl, "core-site.xml"))) {
      site.writeXml(os);
    }
    UserGroupInformation.setConfiguration(conf);
    UserGroupInformation.loginUserFromKeytab(principal, keytab);
  }
}
