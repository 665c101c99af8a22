package rdma

import (
	"fmt"
)

// Config is a rank's RDMA settings.
type Config struct {
	// Mode is spindle.rdma.mode.
	Mode Mode
	// Devices is spindle.rdma.devices (see Filter); empty selects every
	// device.
	Devices string
	// Sysfs is where devices are read from; the zero value reads the
	// running host.
	Sysfs Sysfs
}

// DefaultConfig returns the settings of a job that says nothing about
// RDMA: every device, in auto mode, on the running host.
func DefaultConfig() Config { return Config{Mode: ModeAuto} }

// Validate reports a bad mode or device list, naming the key.
func (c Config) Validate() error {
	if _, err := ParseMode(string(c.Mode)); err != nil {
		return fmt.Errorf("spindle.rdma.mode: %w", err)
	}
	if _, err := ParseFilter(c.Devices); err != nil {
		return fmt.Errorf("spindle.rdma.devices: %w", err)
	}
	return nil
}

// Plan is what one rank found and chose.
type Plan struct {
	// Devices are every RDMA device of the host.
	Devices []Device
	// Selection is the ports the rank uses.
	Selection Selection
	// Env is the hints for the training frameworks (see Selection.Env).
	Env map[string]string
	// Summary is the one-line report for the driver's log.
	Summary string
}

// Discover reads the host's RDMA devices and selects the rank's ports. It
// fails on a bad configuration, and with an error wrapping ErrNoDevice
// when the mode is required and nothing is usable; the Plan is filled in
// either way, so the caller can report what was found. userSet reports the
// variables the user set, which the hints leave alone.
func Discover(cfg Config, userSet func(name string) bool) (Plan, error) {
	if err := cfg.Validate(); err != nil {
		return Plan{}, err
	}
	mode, _ := ParseMode(string(cfg.Mode))
	filter, _ := ParseFilter(cfg.Devices)
	var p Plan
	if mode != ModeOff {
		devs, err := cfg.Sysfs.Devices()
		if err != nil {
			return Plan{}, err
		}
		p.Devices = devs
	}
	p.Selection = Select(p.Devices, filter, mode)
	p.Env = p.Selection.Env(userSet)
	p.Summary = p.Selection.Summary()
	return p, p.Selection.Check()
}
