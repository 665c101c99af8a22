// Package outlines reads the output of a child process as lines of
// bounded length, so that a process writing a line without end (a
// progress bar redrawn with carriage returns, a binary blob) neither
// stalls its reader nor grows its memory without bound.
package outlines
