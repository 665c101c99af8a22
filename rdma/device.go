package rdma

import (
	"fmt"
	"net/netip"
	"strings"
)

// Link layers of a port, as sysfs spells them.
const (
	LinkLayerInfiniBand = "InfiniBand"
	LinkLayerEthernet   = "Ethernet"
)

// GID types, as sysfs spells them (gid_attrs/types).
const (
	GIDTypeRoCEv1 = "IB/RoCE v1"
	GIDTypeRoCEv2 = "RoCE v2"
)

// Device is one RDMA device (an HCA, or a RoCE NIC function): mlx5_0.
type Device struct {
	// Name is the kernel's name for the device (mlx5_0, mlx5_bond_0).
	Name string
	// NodeGUID, HCAType and FirmwareVersion identify the hardware.
	NodeGUID, HCAType, FirmwareVersion string
	// PCIDevice is the PCI function the device sits on (0000:3b:00.0), or
	// "" when sysfs does not say.
	PCIDevice string
	// CharDevices are the device's /dev/infiniband nodes (uverbs0, ...),
	// which a process needs to use it.
	CharDevices []string
	// Ports are the device's ports, by number.
	Ports []Port
}

// Port is one port of an RDMA device.
type Port struct {
	// Device is the name of the device the port belongs to.
	Device string
	// Num is the port number, from 1.
	Num int
	// State is the logical state: ACTIVE, DOWN, INIT, ARMED.
	State string
	// PhysState is the physical state: LinkUp, Disabled, Polling.
	PhysState string
	// LinkLayer is LinkLayerInfiniBand or LinkLayerEthernet (RoCE).
	LinkLayer string
	// Rate is the port's rate as sysfs spells it ("100 Gb/sec (4X EDR)"),
	// RateGbps its number.
	Rate     string
	RateGbps float64
	// LID is the InfiniBand local identifier (0 on Ethernet).
	LID uint16
	// GIDs are the port's non-zero GID table entries.
	GIDs []GID
	// Netdev is the network interface the port sits on: the one its RoCE
	// GIDs name, or the IPoIB interface of an InfiniBand port; "" if none.
	Netdev string
	// Slaves are Netdev's bonded interfaces when it is a bond.
	Slaves []string
	// Addrs are the IP addresses of Netdev, by which the host is reachable
	// over this port's fabric.
	Addrs []netip.Addr
}

// GID is one entry of a port's GID table.
type GID struct {
	// Index is the entry's index, which NCCL_IB_GID_INDEX and
	// UCX_IB_GID_INDEX name.
	Index int
	// GID is the address, as sysfs spells it.
	GID string
	// Type is GIDTypeRoCEv1 or GIDTypeRoCEv2 (InfiniBand ports report
	// GIDTypeRoCEv1 for their native GIDs).
	Type string
	// Netdev is the network interface of a RoCE GID.
	Netdev string
}

// IPv4 returns the IPv4 address an IPv4-mapped GID carries.
func (g GID) IPv4() (netip.Addr, bool) {
	var b [16]byte
	hex := strings.ReplaceAll(g.GID, ":", "")
	if len(hex) != 32 {
		return netip.Addr{}, false
	}
	for i := range 16 {
		var v byte
		if _, err := fmt.Sscanf(hex[2*i:2*i+2], "%02x", &v); err != nil {
			return netip.Addr{}, false
		}
		b[i] = v
	}
	a := netip.AddrFrom16(b)
	if !a.Is4In6() {
		return netip.Addr{}, false
	}
	return a.Unmap(), true
}

// Active reports whether the port can carry traffic.
func (p Port) Active() bool { return p.State == "ACTIVE" }

// RoCE reports whether the port runs RDMA over Ethernet.
func (p Port) RoCE() bool { return p.LinkLayer == LinkLayerEthernet }

// RoCEv2GID returns the GID index to use for RoCE v2 on this port: the
// RoCE v2 entry with an IPv4-mapped address (routable, what NCCL and UCX
// need across subnets), else any RoCE v2 entry; ok is false on
// InfiniBand ports and ports without RoCE v2.
func (p Port) RoCEv2GID() (g GID, ok bool) {
	if !p.RoCE() {
		return GID{}, false
	}
	for _, c := range p.GIDs {
		if c.Type == GIDTypeRoCEv2 {
			if _, v4 := c.IPv4(); v4 {
				return c, true
			}
			if !ok {
				g, ok = c, true
			}
		}
	}
	return g, ok
}

// Kind names the port's fabric for people: "InfiniBand", "RoCE v2",
// "RoCE v1".
func (p Port) Kind() string {
	if !p.RoCE() {
		return LinkLayerInfiniBand
	}
	if _, ok := p.RoCEv2GID(); ok {
		return "RoCE v2"
	}
	return "RoCE v1"
}

// String describes the port in one line: "mlx5_0 port 1 RoCE v2 on eth2,
// 100 Gb/s".
func (p Port) String() string {
	s := fmt.Sprintf("%s port %d %s", p.Device, p.Num, p.Kind())
	if p.Netdev != "" {
		s += " on " + p.Netdev
	}
	if p.RateGbps > 0 {
		s += fmt.Sprintf(", %g Gb/s", p.RateGbps)
	}
	if !p.Active() {
		s += ", " + strings.ToLower(p.State)
	}
	return s
}

// Netdevs returns the distinct network interfaces of ports, in order.
func Netdevs(ports []Port) []string {
	var out []string
	for _, p := range ports {
		if p.Netdev != "" && !contains(out, p.Netdev) {
			out = append(out, p.Netdev)
		}
	}
	return out
}

// DeviceForNetdev returns the device and port whose traffic goes through
// netdev (directly, or as a slave of the bond a port sits on).
func DeviceForNetdev(devs []Device, netdev string) (Port, bool) {
	for _, d := range devs {
		for _, p := range d.Ports {
			if p.Netdev == netdev || contains(p.Slaves, netdev) {
				return p, true
			}
		}
	}
	return Port{}, false
}

func contains(s []string, v string) bool {
	for _, x := range s {
		if x == v {
			return true
		}
	}
	return false
}
