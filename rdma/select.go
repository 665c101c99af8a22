package rdma

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Mode says whether a job uses RDMA (spindle.rdma.mode).
type Mode string

// Modes.
const (
	// ModeAuto uses RDMA where a usable device is found and TCP elsewhere.
	ModeAuto Mode = "auto"
	// ModeRequired fails the job at start on a rank without a usable
	// device.
	ModeRequired Mode = "required"
	// ModeOff never uses RDMA, and tells the frameworks so.
	ModeOff Mode = "off"
)

// ErrNoDevice means spindle.rdma.mode is required and a rank found no
// usable RDMA device.
var ErrNoDevice = errors.New("rdma: no usable RDMA device")

// ParseMode parses a spindle.rdma.mode value; empty is ModeAuto.
func ParseMode(s string) (Mode, error) {
	switch m := Mode(strings.ToLower(strings.TrimSpace(s))); m {
	case "":
		return ModeAuto, nil
	case ModeAuto, ModeRequired, ModeOff:
		return m, nil
	}
	return "", fmt.Errorf("rdma: mode %q: want auto, required or off", s)
}

// Filter selects devices and ports by name, with NCCL_IB_HCA's syntax:
// a comma-separated list of device[:port] entries; a name matches every
// device it is a prefix of ("mlx5" matches mlx5_0 and mlx5_1) unless the
// list starts with "=", which asks for exact names; a list starting with
// "^" excludes what it matches instead. Empty selects everything.
type Filter struct {
	exclude, exact bool
	items          []filterItem
}

type filterItem struct {
	name string
	port int // 0: every port
}

// ParseFilter parses a spindle.rdma.devices value.
func ParseFilter(s string) (Filter, error) {
	spec := strings.TrimSpace(s)
	s = spec
	var f Filter
	if rest, ok := strings.CutPrefix(s, "^"); ok {
		f.exclude, s = true, rest
	}
	if rest, ok := strings.CutPrefix(s, "="); ok {
		f.exact, s = true, rest
	}
	if s == "" {
		if f.exclude || f.exact {
			return Filter{}, fmt.Errorf("rdma: device list %q names no device", spec)
		}
		return f, nil
	}
	for _, e := range strings.Split(s, ",") {
		e = strings.TrimSpace(e)
		name, port, hasPort := strings.Cut(e, ":")
		it := filterItem{name: name}
		if name == "" {
			return Filter{}, fmt.Errorf("rdma: device list entry %q: no device name", e)
		}
		if hasPort {
			n, err := strconv.Atoi(port)
			if err != nil || n < 1 {
				return Filter{}, fmt.Errorf("rdma: device list entry %q: port %q is not a port number", e, port)
			}
			it.port = n
		}
		f.items = append(f.items, it)
	}
	return f, nil
}

// Match reports whether the filter selects port of device.
func (f Filter) Match(device string, port int) bool {
	if len(f.items) == 0 {
		return true
	}
	hit := false
	for _, it := range f.items {
		nameOK := device == it.name || (!f.exact && strings.HasPrefix(device, it.name))
		if nameOK && (it.port == 0 || it.port == port) {
			hit = true
			break
		}
	}
	return hit != f.exclude
}

// String returns the filter in its parsed syntax.
func (f Filter) String() string {
	var b strings.Builder
	if f.exclude {
		b.WriteByte('^')
	}
	if f.exact {
		b.WriteByte('=')
	}
	for i, it := range f.items {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(it.name)
		if it.port > 0 {
			fmt.Fprintf(&b, ":%d", it.port)
		}
	}
	return b.String()
}

// Selection is the RDMA ports a rank uses, and why, when it uses none.
type Selection struct {
	// Mode is the mode the selection was made in.
	Mode Mode
	// Ports are the selected ports, all of one link layer; empty when the
	// rank uses TCP.
	Ports []Port
	// Reason says why Ports is empty ("spindle.rdma.mode is off", "no
	// RDMA devices", "mlx5_0 port 1 is down"), for the one line a rank
	// logs.
	Reason string
}

// Select picks the ports a rank uses from devs: the active ports the
// filter selects (RoCE ones only when they sit on a network interface),
// of a single link layer (the one with the most ports, InfiniBand on a
// tie), since a job's ranks must meet on one fabric.
func Select(devs []Device, f Filter, mode Mode) Selection {
	sel := Selection{Mode: mode}
	if mode == ModeOff {
		sel.Reason = "spindle.rdma.mode is off"
		return sel
	}
	if len(devs) == 0 {
		sel.Reason = "no RDMA devices"
		return sel
	}
	var ib, roce []Port
	var skipped []string
	for _, d := range devs {
		for _, p := range d.Ports {
			switch {
			case !f.Match(d.Name, p.Num):
				skipped = append(skipped, fmt.Sprintf("%s port %d not in spindle.rdma.devices=%s", d.Name, p.Num, f))
			case !p.Active():
				skipped = append(skipped, fmt.Sprintf("%s port %d is %s", d.Name, p.Num, strings.ToLower(p.State)))
			case p.RoCE() && p.Netdev == "":
				skipped = append(skipped, fmt.Sprintf("%s port %d (RoCE) sits on no network interface", d.Name, p.Num))
			case p.RoCE():
				roce = append(roce, p)
			default:
				ib = append(ib, p)
			}
		}
	}
	switch {
	case len(ib) >= len(roce) && len(ib) > 0:
		sel.Ports = ib
	case len(roce) > 0:
		sel.Ports = roce
	default:
		sel.Reason = "no usable RDMA port: " + strings.Join(skipped, "; ")
	}
	return sel
}

// Usable reports whether the rank has ports to use.
func (s Selection) Usable() bool { return len(s.Ports) > 0 }

// Summary is the one line a rank reports to the driver's log: the ports
// it uses ("mlx5_0 port 1 RoCE v2 on eth2, 100 Gb/s"), or why it uses TCP.
func (s Selection) Summary() string {
	if !s.Usable() {
		return "TCP (" + s.Reason + ")"
	}
	parts := make([]string, len(s.Ports))
	for i, p := range s.Ports {
		parts[i] = p.String()
	}
	return strings.Join(parts, "; ")
}

// Check returns an error wrapping ErrNoDevice when the mode is required
// and nothing is usable.
func (s Selection) Check() error {
	if s.Mode == ModeRequired && !s.Usable() {
		return fmt.Errorf("%w (spindle.rdma.mode is required): %s", ErrNoDevice, s.Reason)
	}
	return nil
}
