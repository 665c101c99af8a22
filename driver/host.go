package driver

import (
	"fmt"
	"net"
	"os"
	"strconv"
)

// hostAddrs is one network interface as host selection sees it.
type hostAddrs struct {
	name     string
	up       bool
	loopback bool
	ips      []net.IP
}

// systemInterfaces lists this machine's interfaces.
func systemInterfaces() ([]hostAddrs, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list network interfaces: %w", err)
	}
	out := make([]hostAddrs, 0, len(ifaces))
	for _, ifc := range ifaces {
		h := hostAddrs{name: ifc.Name, up: ifc.Flags&net.FlagUp != 0, loopback: ifc.Flags&net.FlagLoopback != 0}
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				h.ips = append(h.ips, ipn.IP)
			}
		}
		out = append(out, h)
	}
	return out, nil
}

// pickHost applies spindle.network.interface's rule to choose the address
// the driver advertises: the named interface's IPv4 address; without a
// name, the first non-loopback interface that is up and has one; else
// loopback.
func pickHost(ifaces []hostAddrs, name string) (string, error) {
	if name != "" {
		for _, ifc := range ifaces {
			if ifc.name != name {
				continue
			}
			if len(ifc.ips) == 0 {
				return "", fmt.Errorf("%w: network interface %q (spindle.network.interface) has no IPv4 address", ErrConfig, name)
			}
			return ifc.ips[0].String(), nil
		}
		return "", fmt.Errorf("%w: no network interface %q on this host (spindle.network.interface)", ErrConfig, name)
	}
	for _, ifc := range ifaces {
		if ifc.up && !ifc.loopback && len(ifc.ips) > 0 {
			return ifc.ips[0].String(), nil
		}
	}
	return "127.0.0.1", nil
}

// advertiseAddr is the address executors dial: the advertised host when
// there is one, the listening address, or this host's name when listening
// on every interface with nothing better known.
func advertiseAddr(advertise string, a *net.TCPAddr) (string, error) {
	switch {
	case advertise != "":
		return net.JoinHostPort(advertise, strconv.Itoa(a.Port)), nil
	case !a.IP.IsUnspecified():
		return a.String(), nil
	}
	host, err := os.Hostname()
	if err != nil {
		return "", fmt.Errorf("find this host's name for executors to reach the driver (set spindle.driver.host): %w", err)
	}
	return net.JoinHostPort(host, strconv.Itoa(a.Port)), nil
}
