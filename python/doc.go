// Package python carries the spindle Python package (the spindle/
// directory beside this file) inside every spindle binary, so that a
// binary copied anywhere — a gateway, a standalone worker, a YARN
// container — can give its training processes `import spindle` with no
// checkout or install beside it.
//
// The package is unpacked on first use into a cache directory named after
// a hash of its content (Dir), written into a temporary directory and
// renamed into place, so that two executors starting at once on one host
// never see a half-written tree and a new binary never reuses an old
// one's files.
package python
