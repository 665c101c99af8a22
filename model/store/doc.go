// Package store is Spindle's model store: a directory on any file system
// Spindle reads (a local path, file:// or hdfs:// URI; configured with
// spindle.models.dir) holding models as ONNX, one directory per version.
//
// The layout is
//
//	DIR/NAME/VERSION/model.onnx      the model (and any ONNX external-data files beside it)
//	DIR/NAME/VERSION/manifest.json   what it is and where it came from (see Manifest)
//
// with VERSION = 1, 2, 3, ... A version is published atomically: its files
// are written into a hidden directory beside the versions (DIR/NAME/.publish-*)
// and renamed to the next free number only when every file and the
// manifest are complete. A reader therefore sees a version whole or not at
// all; a crashed publish leaves only a hidden directory that readers skip;
// concurrent publishers of one name get distinct versions, since a rename
// onto a version that already exists fails and the publisher takes the
// next number.
package store
