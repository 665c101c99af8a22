// Package syncbuf has a byte buffer that one goroutine may write while
// another reads it: the output of a child process or a logger, read by a
// test while it runs.
package syncbuf
