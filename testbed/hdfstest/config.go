package hdfstest

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	osuser "os/user"
	"time"

	"github.com/spindle-ml/spindle/internal/hadoop/hadooprpc"
)

// Config configures a test HDFS cluster.
type Config struct {
	// Dir holds the cluster's state: the namenode image and each datanode's
	// block files. Starting again on the same Dir brings the files back.
	Dir string
	// DataNodes is the number of datanodes.
	DataNodes int
	// NameNodes is the number of namenode RPC endpoints. With more than one,
	// the cluster is an HA nameservice: one endpoint is active and the others
	// answer StandbyException, so clients exercise failover.
	NameNodes int
	// Nameservice is the logical name of an HA cluster in written
	// configuration (fs.defaultFS hdfs://<Nameservice>).
	Nameservice string
	// BlockSize is the default block size of new files; keep it small so
	// test files span several blocks.
	BlockSize int64
	// Replication is the default replication of new files.
	Replication int
	// BytesPerChecksum is the chunk size checksums cover.
	BytesPerChecksum int
	// ReadPacketSize is the data size of the packets datanodes send readers.
	ReadPacketSize int
	// ListingLimit is the number of entries per getListing page.
	ListingLimit int
	// Superuser is the HDFS superuser; it owns the root directory and
	// bypasses permission checks. Default: the login user.
	Superuser string
	// Supergroup is the superuser's group and the root directory's group.
	Supergroup string
	// Groups maps users to their groups; a user missing from it is in a
	// group of its own name.
	Groups map[string][]string
	// Host is the IP address every server binds to.
	Host string
	// NameNodePorts fixes the namenode ports (zero or missing: any free port).
	NameNodePorts []int
	// DataNodeHostnames are the hostnames datanodes report, which clients
	// see as block locations; missing ones are "localhost".
	DataNodeHostnames []string
	// SkipReadVerification stops datanodes from verifying chunk checksums
	// before sending them, leaving the check to the client alone.
	SkipReadVerification bool
	// LeaseTimeout is how long a writer's lease lasts without renewal
	// before another client may take the file over.
	LeaseTimeout time.Duration
	// Logger receives the cluster's logs; nil discards them.
	Logger *slog.Logger
	// SASL, when set, authenticates the namenodes' clients, and
	// KerberosPrincipal, when set, makes the written configuration a
	// Kerberized cluster's (hadoop.security.authentication kerberos,
	// dfs.namenode.kerberos.principal): with hadooprpc.KerberosServer, a
	// secure HDFS for tests.
	SASL              hadooprpc.SASL
	KerberosPrincipal string
	// TokenRenewInterval, when set, gives the namenode a delegation-token
	// secret manager, as a secure namenode has: getDelegationToken for
	// Kerberos callers, renewal by the token's renewer for this long at a
	// time up to TokenMaxLifetime (default 7 days), cancellation, and
	// TOKEN authentication (SASL DIGEST-MD5) beside SASL, which must then
	// be a hadooprpc.KerberosServer, at its Protection (one
	// hadoop.rpc.protection for both methods, as in Hadoop).
	TokenRenewInterval time.Duration
	TokenMaxLifetime   time.Duration
	// DataTransferProtection, when set, is dfs.data.transfer.protection
	// (authentication, integrity or privacy, or a list in order of
	// preference): the namenode hands out block tokens, and datanodes
	// open every connection with the SASL handshake, authenticating the
	// client's block token and protecting the rest at the level chosen;
	// they refuse connections without it, and operations whose block
	// token does not grant them. The written configuration says so.
	DataTransferProtection string
	// DataTransferCipherSuites is dfs.encrypt.data.transfer.cipher.suites:
	// with AES/CTR/NoPadding, datanodes switch a connection at privacy to
	// AES-CTR when the client offers it. The written configuration says so.
	DataTransferCipherSuites string

	poolID       string
	verifyOnRead bool
}

// DefaultConfig returns the defaults: 3 datanodes, one namenode, 1 MiB
// blocks, replication 3, and 256 KiB read packets (HDFS sends 64 KiB; on
// loopback larger packets read faster, measured by fsys's benchmarks).
func DefaultConfig() Config {
	return Config{
		DataNodes:        3,
		NameNodes:        1,
		Nameservice:      "spindle",
		BlockSize:        1 << 20,
		BytesPerChecksum: 512,
		ReadPacketSize:   256 << 10,
		ListingLimit:     1000,
		Supergroup:       "supergroup",
		Host:             "127.0.0.1",
		LeaseTimeout:     60 * time.Second,
	}
}

// withDefaults fills the zero fields of c from DefaultConfig.
func (c Config) withDefaults() Config {
	d := DefaultConfig()
	if c.DataNodes == 0 {
		c.DataNodes = d.DataNodes
	}
	if c.NameNodes == 0 {
		c.NameNodes = d.NameNodes
	}
	if c.Nameservice == "" {
		c.Nameservice = d.Nameservice
	}
	if c.BlockSize == 0 {
		c.BlockSize = d.BlockSize
	}
	if c.Replication == 0 {
		c.Replication = min(3, c.DataNodes)
	}
	if c.BytesPerChecksum == 0 {
		c.BytesPerChecksum = d.BytesPerChecksum
	}
	if c.ReadPacketSize == 0 {
		c.ReadPacketSize = d.ReadPacketSize
	}
	if c.ListingLimit == 0 {
		c.ListingLimit = d.ListingLimit
	}
	if c.Superuser == "" {
		c.Superuser = "hdfs"
		if u, err := osuser.Current(); err == nil && u.Username != "" {
			c.Superuser = u.Username
		}
	}
	if c.Supergroup == "" {
		c.Supergroup = d.Supergroup
	}
	if c.Host == "" {
		c.Host = d.Host
	}
	if c.LeaseTimeout == 0 {
		c.LeaseTimeout = d.LeaseTimeout
	}
	if c.TokenRenewInterval > 0 && c.TokenMaxLifetime == 0 {
		c.TokenMaxLifetime = 7 * 24 * time.Hour
	}
	c.verifyOnRead = !c.SkipReadVerification
	return c
}

// Validate reports the first invalid field.
func (c Config) Validate() error {
	switch {
	case c.Dir == "":
		return errors.New("hdfstest: Config.Dir is required")
	case c.DataNodes < 1:
		return fmt.Errorf("hdfstest: DataNodes is %d, want at least 1", c.DataNodes)
	case c.NameNodes < 1:
		return fmt.Errorf("hdfstest: NameNodes is %d, want at least 1", c.NameNodes)
	case c.BytesPerChecksum < 1:
		return fmt.Errorf("hdfstest: BytesPerChecksum is %d, want at least 1", c.BytesPerChecksum)
	case c.BlockSize < int64(c.BytesPerChecksum) || c.BlockSize%int64(c.BytesPerChecksum) != 0:
		return fmt.Errorf("hdfstest: BlockSize %d is not a positive multiple of BytesPerChecksum %d", c.BlockSize, c.BytesPerChecksum)
	case c.Replication < 1 || c.Replication > c.DataNodes:
		return fmt.Errorf("hdfstest: Replication %d is outside [1, DataNodes=%d]", c.Replication, c.DataNodes)
	case c.ReadPacketSize < c.BytesPerChecksum || c.ReadPacketSize > maxPacketSize/2:
		return fmt.Errorf("hdfstest: ReadPacketSize %d is outside [%d, %d]", c.ReadPacketSize, c.BytesPerChecksum, maxPacketSize/2)
	case c.ListingLimit < 1:
		return fmt.Errorf("hdfstest: ListingLimit is %d, want at least 1", c.ListingLimit)
	case net.ParseIP(c.Host) == nil:
		return fmt.Errorf("hdfstest: Host %q is not an IP address", c.Host)
	case validProtection(c.DataTransferProtection) != nil:
		return fmt.Errorf("hdfstest: DataTransferProtection: %w", validProtection(c.DataTransferProtection))
	case c.TokenRenewInterval < 0 || c.TokenMaxLifetime < 0:
		return fmt.Errorf("hdfstest: negative token lifetime")
	case len(c.NameNodePorts) > c.NameNodes:
		return fmt.Errorf("hdfstest: %d NameNodePorts for %d namenodes", len(c.NameNodePorts), c.NameNodes)
	}
	return nil
}

func validProtection(p string) error {
	_, err := hadooprpc.ParseProtection(p)
	return err
}

// dataTransfer is the datanodes' data-transfer settings.
func (c Config) dataTransfer() hadooprpc.DataTransferConfig {
	return hadooprpc.DataTransferConfig{Protection: c.DataTransferProtection, CipherSuites: c.DataTransferCipherSuites}
}
