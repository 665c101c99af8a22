// Package wire is the feed protocol between an executor and the training
// process it feeds (docs/feed-protocol.md): the server an executor runs on
// a local Unix socket, the Go clients a training program uses to read it,
// and the JSON file that tells a direct-mode process which splits to read.
//
// Three modes exist. In arrow mode each connection carries one standard
// Arrow IPC stream, readable by any Arrow implementation. In tensor mode
// each connection carries a small header and dense little-endian float32
// feature matrices (and a label vector), readable with nothing but numpy;
// the server converts the columns into rows (interleave), eight float32
// columns at a time with an AVX2 transpose where the CPU has it.
// In direct mode there is no socket: the process reads its splits itself
// from the description written by WriteDirectSpec.
//
// Beside the socket, a server may offer its shared-memory twin
// (ServerConfig.SharedMemory, SharedMemoryPath): the same streams, with
// the messages in memory both processes map instead of in the socket,
// which saves the kernel's copies. DialArrow and DialTensor use it when
// it is there. With a SharedRegion made before the pipeline (its
// feed.BatchMemory), arrow batches are decoded into the region and sent
// where they lie, without a copy (inplace.go).
//
// Connection k to a server receives epoch k; connections are served one
// at a time, in order. A connection made after the last epoch receives an
// empty stream whose epoch is -1, so a reader that loops until it sees an
// empty epoch stops.
//
// A training program usually reaches these clients through package task,
// which finds the socket from the environment the executor sets.
package wire
