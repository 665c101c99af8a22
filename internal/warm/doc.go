// Package warm is the command line's client of a session's warm ranks
// (spindle.Session in the Python package, spindle._zygote on each rank):
// `spindle submit --session ID -- python SCRIPT` sends every rank one
// token-checked request over its Unix socket, with a pipe for the run's
// stdout and one for its stderr, and the rank forks a process of its
// warm interpreter to run the script. A rank on another host serves over
// TCP instead (away.go): the script's text goes in the request and the
// output comes back in its answers. The session itself (starting,
// recording, stopping) lives in the Python package, which holds both of
// its ends; this client is in Go so that a run starts without a Python
// interpreter of its own to start first.
package warm
