package rdma

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/spindle-ml/spindle/internal/envcontract"
)

// Variables the hints set, for the frameworks' own transports.
const (
	EnvNCCLIBHCA       = "NCCL_IB_HCA"
	EnvNCCLIBDisable   = "NCCL_IB_DISABLE"
	EnvNCCLIBGIDIndex  = "NCCL_IB_GID_INDEX"
	EnvNCCLSocketIface = "NCCL_SOCKET_IFNAME"
	EnvGlooSocketIface = "GLOO_SOCKET_IFNAME"
	EnvUCXNetDevices   = "UCX_NET_DEVICES"
	EnvUCXTLS          = "UCX_TLS"
	// EnvCollectiveLink selects the data link of Spindle's Go collectives
	// (SPINDLE_COLLECTIVE_LINK; see collective.ParseLinkSpec).
	EnvCollectiveLink = envcontract.CollectiveLink
)

// Values of EnvCollectiveLink the hints set: Spindle's collectives move
// their bytes over UCX (the rdma/ucx package) where both ends of a link
// offer it, and over TCP otherwise.
const (
	LinkUCX         = "ucx"
	LinkUCXRequired = "ucx:required"
	LinkUCXDeclined = "ucx:declined"
)

// HintNames lists every variable Env may set.
var HintNames = []string{EnvNCCLIBHCA, EnvNCCLIBDisable, EnvNCCLIBGIDIndex, EnvNCCLSocketIface, EnvGlooSocketIface, EnvUCXNetDevices, EnvUCXTLS, EnvCollectiveLink}

// Env returns the environment that points a rank's training frameworks
// (NCCL, Gloo, UCX) at the selected ports. userSet reports the variables
// the user set (in --env or the executor's environment): they are left
// out, never overridden.
//
// With ports: NCCL_IB_HCA and UCX_NET_DEVICES name them exactly
// ("=mlx5_0:1", "mlx5_0:1"); NCCL_SOCKET_IFNAME and GLOO_SOCKET_IFNAME
// name the interfaces they sit on when those carry an address (so the
// frameworks' TCP bootstrap runs on the same fabric); NCCL_IB_GID_INDEX is
// the RoCE v2 entry of the first RoCE port (NCCL's default, 0, is RoCE v1
// on mlx5). Without ports (mode off, or nothing usable): NCCL_IB_DISABLE=1,
// and UCX_TLS=^ib so UCX does not try InfiniBand transports either.
//
// SPINDLE_COLLECTIVE_LINK (EnvCollectiveLink) takes Spindle's Go
// collectives onto UCX: "ucx" in auto mode with ports, "ucx:required" in
// required mode; in auto mode without ports "ucx:declined", so the rank
// still negotiates with ranks that have devices and its own links fall
// back to TCP (a rank on the plain TCP link could not talk to them). Mode
// off leaves it unset: every rank is on TCP.
func (s Selection) Env(userSet func(name string) bool) map[string]string {
	env := make(map[string]string)
	set := func(k, v string) {
		if v != "" && (userSet == nil || !userSet(k)) {
			env[k] = v
		}
	}
	switch {
	case s.Mode == ModeRequired:
		set(EnvCollectiveLink, LinkUCXRequired)
	case s.Mode == ModeOff:
	case s.Usable():
		set(EnvCollectiveLink, LinkUCX)
	default:
		set(EnvCollectiveLink, LinkUCXDeclined)
	}
	if !s.Usable() {
		set(EnvNCCLIBDisable, "1")
		set(EnvUCXTLS, "^ib")
		return env
	}
	hcas := make([]string, len(s.Ports))
	for i, p := range s.Ports {
		hcas[i] = fmt.Sprintf("%s:%d", p.Device, p.Num)
	}
	set(EnvNCCLIBHCA, "="+strings.Join(hcas, ","))
	set(EnvUCXNetDevices, strings.Join(hcas, ","))
	var ifaces []string
	for _, p := range s.Ports {
		if p.Netdev != "" && len(p.Addrs) > 0 && !contains(ifaces, p.Netdev) {
			ifaces = append(ifaces, p.Netdev)
		}
	}
	if len(ifaces) > 0 {
		set(EnvNCCLSocketIface, "="+strings.Join(ifaces, ","))
		set(EnvGlooSocketIface, strings.Join(ifaces, ","))
	}
	for _, p := range s.Ports {
		if g, ok := p.RoCEv2GID(); ok {
			set(EnvNCCLIBGIDIndex, strconv.Itoa(g.Index))
			break
		}
	}
	return env
}
