// Package proxy serves Spindle's parameter server to training processes
// that are not Go programs: the executor of every worker of a job with the
// built-in parameter server runs a Proxy on a Unix socket in its private
// work directory (SPINDLE_PS_SOCKET), and the Python package's spindle.ps
// talks to it with a small length-prefixed binary protocol
// (docs/ps-python.md). The proxy holds one ps/client.Client, made on the
// first connection from the facts the executor has (the ranks of role ps,
// their peer ports, the job's peer token), and forwards each call to it.
//
// The socket is the trust boundary on the host: it is created mode 0600,
// so only the training process's user reaches it, while every connection
// from the proxy to the servers is authenticated with the peer token like
// any Go client's. The process itself never needs the token.
package proxy
