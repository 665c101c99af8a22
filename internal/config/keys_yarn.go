package config

import (
	"fmt"
	"strings"
)

// Names of the keys of the YARN cluster manager (--master yarn). The queue
// is spindle.yarn.queue (KeyQueue).
const (
	KeyYARNAMMemory        = "spindle.yarn.am.memory"
	KeyYARNAMCores         = "spindle.yarn.am.cores"
	KeyYARNMaxAttempts     = "spindle.yarn.maxAppAttempts"
	KeyYARNPriority        = "spindle.yarn.priority"
	KeyYARNTags            = "spindle.yarn.tags"
	KeyYARNMemoryOverhead  = "spindle.yarn.executor.memoryOverhead"
	KeyYARNGangTimeout     = "spindle.yarn.gangTimeout"
	KeyYARNLocalityWait    = "spindle.yarn.locality.wait"
	KeyYARNBinaryCache     = "spindle.yarn.binaryCache"
	KeyYARNBinaryCacheKeep = "spindle.yarn.binaryCache.keep"
)

// yarnKeys are the keys of the YARN cluster manager.
var yarnKeys = []Key{
	{Name: KeyYARNAMMemory, Default: "256m", Kind: Bytes, Min: 1 << 20, HasMin: true,
		Doc: "Memory of the ApplicationMaster's container (YARN rounds it up to yarn.scheduler.minimum-allocation-mb). In --deploy-mode cluster the driver runs in it too: give it more for jobs with many input files or executors."},
	{Name: KeyYARNAMCores, Default: "1", Kind: Int, Min: 1, HasMin: true,
		Doc: "Virtual cores of the ApplicationMaster's container."},
	{Name: KeyYARNMaxAttempts, Default: "1", Kind: Int, Min: 1, HasMin: true,
		Doc: "ApplicationMaster attempts YARN makes (maxAppAttempts). In client mode a new attempt cannot rejoin the driver on the gateway: it ends the application as FAILED at once. In cluster mode a new attempt runs the job again with a new gang (YARN has stopped the first attempt's containers), from the newest complete checkpoint of its --checkpoint-dir, if it has one."},
	{Name: KeyYARNPriority, Default: "0", Kind: Int, Min: 0, HasMin: true,
		Doc: "The application's priority in its queue (higher runs sooner where the scheduler honours priorities)."},
	{Name: KeyYARNTags, Default: "", Kind: List,
		Doc: "Application tags, comma-separated, shown by YARN and usable in its queries."},
	{Name: KeyYARNMemoryOverhead, Default: "128m", Kind: Bytes, Min: 0, HasMin: true,
		Doc: "Memory added to each executor's --executor-memory in its container request, for the executor process and the feed beside the training process; YARN kills a container that exceeds the sum."},
	{Name: KeyYARNGangTimeout, Default: "2m", Kind: Duration,
		Doc: "How long the ApplicationMaster waits for YARN to grant every executor's container. When it expires it releases every container it holds (a partial gang never blocks the queue) and the job fails, saying what the queue could not give."},
	{Name: KeyYARNLocalityWait, Default: "3s", Kind: Duration, ZeroOK: true,
		Doc: "How long the ApplicationMaster asks for each executor's container only on the nodes holding its input (the HDFS blocks of its splits), and then as long again on those nodes' racks, before it takes any node. 0 asks for any node at once, leaving the preference to YARN's own delay scheduling."},
	{Name: KeyYARNBinaryCache, Default: "", Kind: String, Check: checkBinaryCache,
		Doc: "Where the gateway keeps the spindle binary on the cluster's default file system, one copy per content digest (<dir>/<sha256>/spindle, owner-only), so that a job whose binary is already there uploads nothing and NodeManagers reuse the copy they localized for an earlier job. Empty means /user/<user>/.spindle/cache; an absolute path moves it; off stages the binary with each application, as files are."},
	{Name: KeyYARNBinaryCacheKeep, Default: "3", Kind: Int, Min: 1, HasMin: true,
		Doc: "How many binaries (digests) the cache keeps: after an upload the gateway deletes the older ones, except those a staging directory of a live application names and those uploaded within the last hour."},
}

// checkBinaryCache accepts off, empty or an absolute path.
func checkBinaryCache(v string) error {
	if v == "" || v == "off" || strings.HasPrefix(v, "/") {
		return nil
	}
	return fmt.Errorf("%q is neither off nor an absolute path on the cluster's default file system (like /user/alice/.spindle/cache)", v)
}
