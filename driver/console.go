package driver

import (
	"fmt"
	"io"
	"sync"

	"github.com/spindle-ml/spindle/internal/outlines"
)

// Console is the submit terminal shared by the progress line and the
// output of training processes. On a terminal it keeps one live line at the
// bottom: a printed line first clears it and then redraws it, so output and
// progress never interleave mid-line.
type Console struct {
	mu       sync.Mutex
	out, err io.Writer
	terminal bool
	live     string
	// tap, when set, sees every output line copied to the console (the
	// job's web UI keeps each rank's lines).
	tap func(toErr bool, line string)
}

// NewConsole returns a Console writing output lines to out and errors and
// progress to err. terminal says whether err is an interactive terminal.
func NewConsole(out, err io.Writer, terminal bool) *Console {
	return &Console{out: out, err: err, terminal: terminal}
}

// Stdout returns a writer whose complete lines go to the console's output.
func (c *Console) Stdout() io.Writer { return c.out }

func (c *Console) line(w io.Writer, s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.terminal && c.live != "" {
		fmt.Fprint(c.err, "\r\033[K")
	}
	fmt.Fprintln(w, s)
	if c.terminal && c.live != "" {
		fmt.Fprint(c.err, c.live)
	}
}

// Println prints a line on the output stream.
func (c *Console) Println(s string) { c.line(c.out, s) }

// Eprintln prints a line on the error stream.
func (c *Console) Eprintln(s string) { c.line(c.err, s) }

// Live replaces the live line (terminals only; elsewhere it does nothing).
func (c *Console) Live(s string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if !c.terminal {
		return
	}
	c.live = s
	fmt.Fprint(c.err, "\r\033[K"+s)
}

// EndLive moves past the live line, leaving it on screen.
func (c *Console) EndLive() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.terminal && c.live != "" {
		fmt.Fprintln(c.err)
	}
	c.live = ""
}

// Terminal reports whether progress is drawn live.
func (c *Console) Terminal() bool { return c.terminal }

// copyLines copies r to the console line by line until r ends. It reads
// r to its end whatever is written (over-long lines are cut), so an
// executor is never blocked writing its output.
func (c *Console) copyLines(r io.Reader, toErr bool) {
	_ = outlines.Read(r, maxConsoleLine, func(line []byte) { c.Output(toErr, string(line)) })
}

// Output prints one line of a training process's output ("[rank N] ...")
// on the error stream when toErr, else on the output stream, and shows it
// on the rank's log page of the job's UI.
func (c *Console) Output(toErr bool, line string) {
	if toErr {
		c.Eprintln(line)
	} else {
		c.Println(line)
	}
	c.mu.Lock()
	tap := c.tap
	c.mu.Unlock()
	if tap != nil {
		tap(toErr, line)
	}
}

// setTap makes tap see every output line from now on.
func (c *Console) setTap(tap func(toErr bool, line string)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.tap = tap
}

// maxConsoleLine is the longest output line printed whole.
const maxConsoleLine = 64 * 1024
