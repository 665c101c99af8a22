package master

import (
	"net"
	"os"
	"slices"

	"github.com/spindle-ml/spindle/standalone/internal/secure"
)

// audiences returns the names under which clients may reach this master,
// each as secure.MasterAudience: its configured address and the address it
// listens on, and, on its port, the machine's host name, localhost and
// every address of its interfaces. A token made for another master (any
// other host, or another port here) is refused.
func audiences(cfg Config, lis net.Addr) []string {
	var addrs []string
	for _, p := range cfg.Peers {
		if p.ID == cfg.ID {
			addrs = append(addrs, p.Addr)
		}
	}
	addrs = append(addrs, cfg.Addr, lis.String())
	var ports []string
	for _, a := range addrs {
		if _, port, err := net.SplitHostPort(a); err == nil && port != "0" {
			ports = append(ports, port)
		}
	}
	hosts := []string{"localhost"}
	if h, err := os.Hostname(); err == nil {
		hosts = append(hosts, h)
	}
	if ifaddrs, err := net.InterfaceAddrs(); err == nil {
		for _, a := range ifaddrs {
			if ipn, ok := a.(*net.IPNet); ok {
				hosts = append(hosts, ipn.IP.String())
			}
		}
	}
	for _, port := range ports {
		for _, h := range hosts {
			addrs = append(addrs, net.JoinHostPort(h, port))
		}
	}
	var out []string
	for _, a := range addrs {
		if a == "" {
			continue
		}
		if aud := secure.MasterAudience(a); !slices.Contains(out, aud) {
			out = append(out, aud)
		}
	}
	return out
}
