// Package resume keeps the records that let a restarted job continue where
// its latest complete checkpoint left it: which checkpoint, at which step,
// and where each rank's feed stood (the epoch, and the batches and rows of
// it that the rank had consumed).
//
// A training process writes one Record per checkpoint it takes part in,
// after its own checkpoint files are committed, under the hidden directory
// Dir of the job's checkpoint directory:
//
//	<checkpoint dir>/.spindle-resume/<checkpoint>/rank-<R>.json
//
// A checkpoint is complete once every rank that must record (every rank
// the feed deals to, or every rank when nothing is fed) has written its
// record, all naming the same step. Latest finds the newest complete one;
// the driver starts a new generation from it, telling each executor where
// its feed starts and each process which checkpoint to load. Because a
// record is written only after the files it stands for, a crash at any
// moment leaves either a complete checkpoint or one Latest passes over.
//
// The driver also keeps the settings of the feed (Settings) beside the
// records: positions only mean something for the same deal of the same
// rows, so records written under other settings are not used.
package resume
