package executor

import (
	"fmt"
	"net"
)

// chooseHost picks the address this rank publishes to its peers:
//
//  1. the first IPv4 address of iface, when an interface is configured;
//  2. otherwise the local address this machine uses to reach the driver,
//     which is loopback for local jobs and the cluster-facing address
//     elsewhere.
//
// It also returns the name of the interface holding that address (for
// GLOO_SOCKET_IFNAME and friends), or "" when none matches.
func chooseHost(iface, driverAddr string) (host, ifname string, err error) {
	if iface != "" {
		ifc, err := net.InterfaceByName(iface)
		if err != nil {
			return "", "", fmt.Errorf("network interface %q (spindle.network.interface): %w", iface, err)
		}
		addrs, err := ifc.Addrs()
		if err != nil {
			return "", "", fmt.Errorf("addresses of interface %q: %w", iface, err)
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.To4() != nil {
				return ipn.IP.String(), iface, nil
			}
		}
		return "", "", fmt.Errorf("network interface %q (spindle.network.interface) has no IPv4 address", iface)
	}
	// A UDP "connection" sends nothing; it only asks the kernel which
	// local address routes to the driver.
	c, err := net.Dial("udp", driverAddr)
	if err != nil {
		return "", "", fmt.Errorf("find the local address that reaches the driver at %s: %w", driverAddr, err)
	}
	defer c.Close()
	ip := c.LocalAddr().(*net.UDPAddr).IP
	return ip.String(), interfaceOf(ip), nil
}

// interfaceOf returns the name of the interface that holds ip.
func interfaceOf(ip net.IP) string {
	ifaces, err := net.Interfaces()
	if err != nil {
		return ""
	}
	for _, ifc := range ifaces {
		addrs, err := ifc.Addrs()
		if err != nil {
			continue
		}
		for _, a := range addrs {
			if ipn, ok := a.(*net.IPNet); ok && ipn.IP.Equal(ip) {
				return ifc.Name
			}
		}
	}
	return ""
}

// reservedPorts holds the ports a training process will use, so no other
// process takes them between registration and the process's exit.
type reservedPorts struct {
	// peer is handed to the training process as an open listener.
	peer *net.TCPListener
	// service is bound but never listened on: the framework binds it
	// itself (PyTorch's MASTER_PORT store, TensorFlow's gRPC server).
	service *heldPort
}

func reservePorts(host string) (*reservedPorts, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return nil, fmt.Errorf("reserve a port on %s: %w", host, err)
	}
	service, err := holdPort(host)
	if err != nil {
		l.Close()
		return nil, err
	}
	return &reservedPorts{peer: l.(*net.TCPListener), service: service}, nil
}

func (r *reservedPorts) ports() []uint32 {
	return []uint32{uint32(r.peer.Addr().(*net.TCPAddr).Port), uint32(r.service.port)}
}

func (r *reservedPorts) close() {
	r.peer.Close()
	r.service.close()
}
