// Package feed turns training inputs into Arrow record batches.
//
// The driver plans with feed/plan: it lists the inputs (files, directories,
// globs on the local disk or HDFS), has Inspect read Parquet footers, Arrow
// IPC footers and CSV files, checks that every file has the same columns,
// and cuts the rows into one list of Splits per rank (a JobPlan) so that
// ranks differ by at most one row. A
// Split names whole Parquet row groups, Arrow IPC record batches or a CSV
// byte range aligned to line starts, plus the rows to skip at its start
// (RowOffset) and the rows it holds (Rows), so that one large row group can
// be shared by several ranks. Splits remember the hosts that hold their bytes
// so a cluster manager can place ranks near their data.
//
// An executor builds a Pipeline from its rank's splits. Each epoch the
// pipeline opens the splits (OpenSplit) in an order permuted by seed, epoch
// and rank when shuffling, mixes rows through a bounded shuffle buffer,
// cuts batches of exactly the configured number of rows, and pads or drops
// rows so that every rank yields the same number of batches. A goroutine
// reads ahead while the training process works, bounded by a batch count and
// a memory budget.
//
// Readers fetch only what a split needs: the selected columns of the split's
// row groups (each column chunk with one read, which matters on HDFS), the
// split's record batches, or the split's CSV lines. Parquet footers are
// read once, without allocating, before arrow-go parses them
// (feed/parquet's FooterIndex): the column chunks' statistics, which nothing here looks
// at, are taken out; planning parses only the schema, taking the row
// groups from the index; and a rank that reads only some row groups of a
// file parses its footer thinned to them, so that each executor of a
// large job parses its share of a large footer rather than all of it.
//
// With a cache (PipelineConfig.CacheBytes), a split that an epoch reads to
// its end keeps its decoded batches in memory while they fit, and later
// epochs take them from there instead of reading and decoding the file
// again; splits that do not fit are read every epoch, except Flight
// splits, which go on to local disk as Arrow IPC files up to
// PipelineConfig.SpillBytes (spill.go): a flight is costly to fetch again,
// and pushed rows cannot be fetched again at all.
//
// A pipeline given BatchMemory (the feed's shared memory) allocates the
// buffers of the batches it yields there while it has room, so that the
// feed sends them without copying them (batchmem.go); splits the epoch
// cache records are decoded into the pipeline's own memory.
//
// An input may also be an Arrow Flight flight (grpc://host:port/path),
// whose endpoints are dealt like files, or rows pushed while the job runs
// (flight-put:): the driver runs a push.Server that producers DoPut
// batches into, deals them to ranks in rounds of one batch per rank with
// a bounded buffer that slows producers down, and serves each rank its
// share as one Flight stream that the rank's pipeline reads like any
// other split.
//
// Decoding Parquet is what limits how fast a rank is fed, so the pipeline
// keeps the buffers that decoding frees (and those of the batches the
// consumer releases) and decodes into them again, sparing the Go runtime's
// zeroing and garbage collection; flat integer and float columns, and
// dictionary-encoded string columns, are read straight from their pages
// (feed/parquet's FlatColumns), the others decoded by arrow-go's pqarrow; and a
// prefetching pipeline decodes a split's columns in groups on a few
// goroutines at once, each group up to two batches ahead of the batch
// being handed on (groupDecoder). None of this changes a single batch:
// an epoch yields the same batches for the same configuration.
package feed
