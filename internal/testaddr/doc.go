// Package testaddr hands tests loopback addresses that stay theirs.
//
// Picking a port by listening on :0 and closing the listener races with
// every outgoing connection on the machine: the kernel takes the source
// ports of those from the same ephemeral range, so a port that was free a
// moment ago can be someone else's by the time a server binds it. That
// shows up as rare "address already in use" failures when many test
// packages run at once.
//
// Free avoids the race by choosing ports below the ephemeral range, which
// the kernel never hands out on its own, and by claiming each one with a
// lock file that other test processes honour for as long as the test
// runs. Refusing gives an address that is certain to refuse connections,
// for tests of unreachable servers.
package testaddr
