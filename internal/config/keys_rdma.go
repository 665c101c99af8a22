package config

// Names of the RDMA keys: which devices training processes use, and
// whether they must.
const (
	KeyRDMAMode    = "spindle.rdma.mode"
	KeyRDMADevices = "spindle.rdma.devices"
)

// rdmaKeys are the keys of the rdma package's selection.
var rdmaKeys = []Key{
	{Name: KeyRDMAMode, Default: "auto", Kind: Enum, Enum: []string{"auto", "required", "off"}, ReadBy: ReadBySubmit,
		Doc: "Whether training processes use RDMA: auto (the devices each rank finds, TCP where there are none), required (a rank without a usable device fails the job at start), off (never; NCCL_IB_DISABLE=1). Each rank's choice is in the job's log and sets NCCL_IB_HCA, NCCL_SOCKET_IFNAME, NCCL_IB_GID_INDEX, GLOO_SOCKET_IFNAME, UCX_NET_DEVICES and UCX_TLS unless you set them, and SPINDLE_COLLECTIVE_LINK, which takes Spindle's Go collectives and its parameter server's pulls and pushes onto UCX (see docs/rdma.md)."},
	{Name: KeyRDMADevices, Default: "", Kind: String, ReadBy: ReadBySubmit,
		Doc: "RDMA devices training processes may use, with NCCL_IB_HCA's syntax: device[:port] entries, comma-separated, matching names that start with them (mlx5 matches mlx5_0); a leading = asks for exact names, a leading ^ excludes the entries instead. Empty: every device."},
}
