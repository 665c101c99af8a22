// Package liveness keeps a loop that judges others by their silence from
// blaming them for its own: on a starved host, or in a process stopped
// for a while, a periodic check runs late and hears nobody in the
// meantime, however alive they were.
package liveness
