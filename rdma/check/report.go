package check

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/spindle-ml/spindle/rdma"
)

// ErrBadInput is wrapped by the errors that are the caller's input's
// fault, found before anything ran: a sysfs root that is not one, a bad
// token, a peer that cannot be reached or holds another token.
var ErrBadInput = errors.New("check: bad input")

// inputError is an error that is the caller's input's fault.
type inputError struct{ err error }

func (e *inputError) Error() string        { return e.err.Error() }
func (e *inputError) Unwrap() error        { return e.err }
func (e *inputError) Is(target error) bool { return target == ErrBadInput }

func badInput(format string, args ...any) error {
	return &inputError{fmt.Errorf(format, args...)}
}

// Devices reads the devices under root ("" or "/" for the running host).
// A root other than the host's must be a sysfs tree: a directory holding
// sys/class.
func Devices(root string) ([]rdma.Device, error) {
	if root != "" && root != "/" {
		st, err := os.Stat(filepath.Join(root, "sys", "class"))
		if err != nil || !st.IsDir() {
			return nil, badInput("sysfs root %s: no sys/class directory under it; give the directory that holds sys/ (a copy of a host's /sys)", root)
		}
	}
	devs, err := rdma.Sysfs{Root: root}.Devices()
	if err != nil {
		return nil, &inputError{err}
	}
	return devs, nil
}

// WriteDevices prints devs, their ports and GIDs, and what a job in mode
// with the device filter filter would select.
func WriteDevices(w io.Writer, devs []rdma.Device, mode rdma.Mode, filter rdma.Filter) {
	if len(devs) == 0 {
		fmt.Fprintln(w, "RDMA devices: none")
	} else {
		fmt.Fprintln(w, "RDMA devices:")
	}
	for _, d := range devs {
		var id []string
		for _, kv := range [][2]string{{"", d.HCAType}, {"firmware ", d.FirmwareVersion}, {"node GUID ", d.NodeGUID}, {"PCI ", d.PCIDevice}} {
			if kv[1] != "" {
				id = append(id, kv[0]+kv[1])
			}
		}
		id = append(id, d.CharDevices...)
		fmt.Fprintf(w, "  %s: %s\n", d.Name, strings.Join(id, ", "))
		for _, p := range d.Ports {
			fmt.Fprintf(w, "    port %d: %s (%s), %s, %s", p.Num, orNone(p.State), orNone(p.PhysState), p.Kind(), orNone(p.Rate))
			if p.LID != 0 {
				fmt.Fprintf(w, ", LID %d", p.LID)
			}
			fmt.Fprintln(w)
			netdev := "none"
			if p.Netdev != "" {
				netdev = p.Netdev
				if len(p.Slaves) > 0 {
					netdev += " (bond of " + strings.Join(p.Slaves, ", ") + ")"
				}
				if len(p.Addrs) > 0 {
					var as []string
					for _, a := range p.Addrs {
						as = append(as, a.String())
					}
					netdev += " " + strings.Join(as, " ")
				}
			}
			fmt.Fprintf(w, "      netdev: %s\n", netdev)
			for _, g := range p.GIDs {
				line := fmt.Sprintf("      GID %d: %s %s", g.Index, g.GID, g.Type)
				if g.Netdev != "" {
					line += " on " + g.Netdev
				}
				fmt.Fprintln(w, line)
			}
		}
	}
	sel := rdma.Select(devs, filter, mode)
	what := fmt.Sprintf("spindle.rdma.mode=%s", mode)
	if f := filter.String(); f != "" {
		what += " spindle.rdma.devices=" + f
	}
	fmt.Fprintf(w, "a job with %s uses: %s\n", what, sel.Summary())
	if err := sel.Check(); err != nil {
		fmt.Fprintf(w, "  and fails: %v\n", err)
	}
}

func orNone(s string) string {
	if s == "" {
		return "?"
	}
	return s
}
