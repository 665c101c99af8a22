package yarn

import (
	"github.com/spindle-ml/spindle/internal/config"
)

// ConfigFromProperties builds a client-mode Config from Spindle's
// configuration.
func ConfigFromProperties(p *config.Properties) Config {
	cfg := DefaultConfig()
	cfg.HadoopConfDir = p.String(config.KeyHadoopConfDir)
	cfg.User = p.String(config.KeyHadoopUser)
	cfg.AppName = p.String(config.KeyAppName)
	cfg.Queue = p.String(config.KeyQueue)
	cfg.AMMemoryMB = int(p.Bytes(config.KeyYARNAMMemory) >> 20)
	cfg.AMCores = p.Int(config.KeyYARNAMCores)
	cfg.MaxAttempts = p.Int(config.KeyYARNMaxAttempts)
	cfg.Priority = p.Int(config.KeyYARNPriority)
	cfg.Tags = p.List(config.KeyYARNTags)
	cfg.MemoryOverheadMB = int(p.Bytes(config.KeyYARNMemoryOverhead) >> 20)
	cfg.GangTimeout = p.Duration(config.KeyYARNGangTimeout)
	cfg.LocalityWait = p.Duration(config.KeyYARNLocalityWait)
	cfg.LogLevel = p.String(config.KeyLogLevel)
	cfg.KerberosPrincipal = p.String(config.KeyKerberosPrincipal)
	cfg.KerberosKeytab = p.String(config.KeyKerberosKeytab)
	cfg.RenewTokens = p.Bool(config.KeyTokensRenew)
	cfg.BinaryCache = p.String(config.KeyYARNBinaryCache)
	cfg.BinaryCacheKeep = p.Int(config.KeyYARNBinaryCacheKeep)
	return cfg
}
