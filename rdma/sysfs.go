package rdma

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/Mellanox/rdmamap"
)

// ipoibType is the ARP hardware type of an IPoIB interface (ARPHRD_INFINIBAND).
const ipoibType = "32"

// Sysfs reads a host's RDMA devices from a sysfs tree. Root "/" (or "")
// is the running host, where the device, port and character-device lists
// come from github.com/Mellanox/rdmamap; any other root is a tree laid out
// the same way (a copy of a host's /sys, or a test's fake), read with the
// same rules. Port details (state, link layer, rate, GIDs, netdevs) are
// read from the tree in both cases.
type Sysfs struct {
	// Root is the directory holding sys/ ("/" for the running host).
	Root string
	// Addrs returns the IP addresses of a network interface; nil uses the
	// running host's interfaces when Root is "/", and otherwise only the
	// IPv4 addresses that RoCE GIDs carry.
	Addrs func(netdev string) ([]netip.Addr, error)
}

// lister lists devices, ports and character devices: rdmamap on the
// running host, the tree reader elsewhere.
type lister interface {
	deviceNames() []string
	portNames(dev string) []string
	charDevices(dev string) []string
}

func (s Sysfs) host() bool { return s.Root == "" || s.Root == "/" }

func (s Sysfs) path(parts ...string) string {
	root := s.Root
	if root == "" {
		root = "/"
	}
	return filepath.Join(append([]string{root}, parts...)...)
}

func (s Sysfs) lister() lister {
	if s.host() {
		return rdmamapLister{}
	}
	return treeLister{s}
}

// Devices returns the RDMA devices of the tree, sorted by name, with
// their ports; none (and no error) on a host without RDMA.
func (s Sysfs) Devices() ([]Device, error) {
	return s.devices(s.lister())
}

func (s Sysfs) devices(l lister) ([]Device, error) {
	names := l.deviceNames()
	sort.Strings(names)
	devs := make([]Device, 0, len(names))
	for _, name := range names {
		d, err := s.device(l, name)
		if err != nil {
			return nil, err
		}
		devs = append(devs, d)
	}
	return devs, nil
}

func (s Sysfs) device(l lister, name string) (Device, error) {
	dir := s.path("sys/class/infiniband", name)
	d := Device{
		Name:            name,
		NodeGUID:        readTrim(filepath.Join(dir, "node_guid")),
		HCAType:         readTrim(filepath.Join(dir, "hca_type")),
		FirmwareVersion: readTrim(filepath.Join(dir, "fw_ver")),
		PCIDevice:       linkBase(filepath.Join(dir, "device")),
		CharDevices:     l.charDevices(name),
	}
	ports := l.portNames(name)
	sort.Slice(ports, func(i, j int) bool { return atoi(ports[i]) < atoi(ports[j]) })
	for _, pn := range ports {
		n, err := strconv.Atoi(pn)
		if err != nil || n < 1 {
			continue
		}
		p, err := s.port(d, n)
		if err != nil {
			return Device{}, fmt.Errorf("rdma: read port %d of %s under %s: %w", n, name, s.path("sys"), err)
		}
		d.Ports = append(d.Ports, p)
	}
	return d, nil
}

func (s Sysfs) port(d Device, n int) (Port, error) {
	dir := s.path("sys/class/infiniband", d.Name, "ports", strconv.Itoa(n))
	state, err := os.ReadFile(filepath.Join(dir, "state"))
	if err != nil {
		return Port{}, err
	}
	p := Port{
		Device:    d.Name,
		Num:       n,
		State:     afterColon(string(state)),
		PhysState: afterColon(readTrim(filepath.Join(dir, "phys_state"))),
		LinkLayer: readTrim(filepath.Join(dir, "link_layer")),
		Rate:      readTrim(filepath.Join(dir, "rate")),
	}
	if p.LinkLayer == "" {
		p.LinkLayer = LinkLayerInfiniBand // kernels before link_layer existed
	}
	if f := strings.Fields(p.Rate); len(f) > 0 {
		p.RateGbps, _ = strconv.ParseFloat(f[0], 64)
	}
	if lid, err := strconv.ParseUint(strings.TrimPrefix(readTrim(filepath.Join(dir, "lid")), "0x"), 16, 16); err == nil {
		p.LID = uint16(lid)
	}
	p.GIDs = s.gids(dir)
	if p.RoCE() {
		for _, g := range p.GIDs {
			if g.Netdev != "" {
				p.Netdev = g.Netdev
				break
			}
		}
	} else {
		p.Netdev = s.ipoibNetdev(d.PCIDevice, n)
	}
	if p.Netdev != "" {
		if sl := readTrim(s.path("sys/class/net", p.Netdev, "bonding/slaves")); sl != "" {
			p.Slaves = strings.Fields(sl)
		}
		p.Addrs = s.addrs(p)
	}
	return p, nil
}

// gids reads the non-zero entries of a port's GID table. Unused entries
// read as the zero GID, or fail to read (EINVAL) on some kernels.
func (s Sysfs) gids(portDir string) []GID {
	entries, err := os.ReadDir(filepath.Join(portDir, "gids"))
	if err != nil {
		return nil
	}
	var out []GID
	for _, e := range entries {
		i, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		g := readTrim(filepath.Join(portDir, "gids", e.Name()))
		if g == "" || strings.Trim(g, "0:") == "" {
			continue
		}
		out = append(out, GID{
			Index:  i,
			GID:    g,
			Type:   readTrim(filepath.Join(portDir, "gid_attrs/types", e.Name())),
			Netdev: readTrim(filepath.Join(portDir, "gid_attrs/ndevs", e.Name())),
		})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].Index < out[b].Index })
	return out
}

// ipoibNetdev finds the IPoIB interface of port n of the device on PCI
// function pci: an interface of type infiniband on the same function
// whose dev_id (port - 1) matches, when it says.
func (s Sysfs) ipoibNetdev(pci string, n int) string {
	if pci == "" {
		return ""
	}
	entries, err := os.ReadDir(s.path("sys/class/net"))
	if err != nil {
		return ""
	}
	var match string
	for _, e := range entries {
		dir := s.path("sys/class/net", e.Name())
		if readTrim(filepath.Join(dir, "type")) != ipoibType || linkBase(filepath.Join(dir, "device")) != pci {
			continue
		}
		if id := readTrim(filepath.Join(dir, "dev_id")); id != "" {
			if v, err := strconv.ParseInt(strings.TrimPrefix(id, "0x"), 16, 32); err == nil && int(v) != n-1 {
				continue
			}
		}
		if match == "" || e.Name() < match {
			match = e.Name()
		}
	}
	return match
}

// addrs returns the IP addresses of p's netdev.
func (s Sysfs) addrs(p Port) []netip.Addr {
	if s.Addrs != nil {
		a, err := s.Addrs(p.Netdev)
		if err == nil {
			return a
		}
	} else if s.host() {
		if a, err := interfaceAddrs(p.Netdev); err == nil {
			return a
		}
	}
	var out []netip.Addr
	for _, g := range p.GIDs {
		if a, ok := g.IPv4(); ok && !containsAddr(out, a) {
			out = append(out, a)
		}
	}
	return out
}

// interfaceAddrs returns the running host's addresses on netdev.
func interfaceAddrs(netdev string) ([]netip.Addr, error) {
	ifi, err := net.InterfaceByName(netdev)
	if err != nil {
		return nil, err
	}
	as, err := ifi.Addrs()
	if err != nil {
		return nil, err
	}
	var out []netip.Addr
	for _, a := range as {
		if pfx, err := netip.ParsePrefix(a.String()); err == nil {
			out = append(out, pfx.Addr())
		}
	}
	return out, nil
}

// rdmamapLister lists with rdmamap, which reads the running host's fixed
// paths (/sys/class/infiniband, /sys/class/infiniband_verbs, /dev/infiniband).
type rdmamapLister struct{}

func (rdmamapLister) deviceNames() []string           { return rdmamap.GetRdmaDeviceList() }
func (rdmamapLister) portNames(dev string) []string   { return rdmamap.GetPorts(dev) }
func (rdmamapLister) charDevices(dev string) []string { return rdmamap.GetRdmaCharDevices(dev) }

// treeLister lists from a tree with rdmamap's rules: a device is an entry
// of sys/class/infiniband that is not a directory (sysfs holds symlinks
// there), a port an entry of its ports directory, and its verbs node the
// uverbsN whose ibdev names it.
type treeLister struct{ s Sysfs }

func (t treeLister) deviceNames() []string {
	entries, err := os.ReadDir(t.s.path("sys/class/infiniband"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if !e.IsDir() {
			out = append(out, e.Name())
		}
	}
	return out
}

func (t treeLister) portNames(dev string) []string {
	entries, err := os.ReadDir(t.s.path("sys/class/infiniband", dev, "ports"))
	if err != nil {
		return nil
	}
	out := make([]string, 0, len(entries))
	for _, e := range entries {
		out = append(out, e.Name())
	}
	return out
}

func (t treeLister) charDevices(dev string) []string {
	entries, err := os.ReadDir(t.s.path("sys/class/infiniband_verbs"))
	if err != nil {
		return nil
	}
	var out []string
	for _, e := range entries {
		if strings.HasPrefix(e.Name(), "uverbs") && readTrim(t.s.path("sys/class/infiniband_verbs", e.Name(), "ibdev")) == dev {
			out = append(out, "/dev/infiniband/"+e.Name())
		}
	}
	return out
}

func readTrim(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// linkBase returns the last element of the symlink at path's target.
func linkBase(path string) string {
	t, err := os.Readlink(path)
	if err != nil {
		return ""
	}
	return filepath.Base(t)
}

// afterColon turns "4: ACTIVE" into "ACTIVE".
func afterColon(s string) string {
	s = strings.TrimSpace(s)
	if _, v, ok := strings.Cut(s, ":"); ok {
		return strings.TrimSpace(v)
	}
	return s
}

func atoi(s string) int {
	n, _ := strconv.Atoi(s)
	return n
}

func containsAddr(s []netip.Addr, a netip.Addr) bool {
	for _, x := range s {
		if x == a {
			return true
		}
	}
	return false
}
