package hdfstest

import (
	"encoding/xml"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// WriteConfig writes core-site.xml and hdfs-site.xml for this cluster into
// dir, ready to be HADOOP_CONF_DIR: fs.defaultFS, and for an HA cluster its
// nameservice and namenode addresses.
func (c *Cluster) WriteConfig(dir string) error {
	auth := "simple"
	if c.cfg.KerberosPrincipal != "" {
		auth = "kerberos"
	}
	core := []property{
		{"fs.defaultFS", c.URI()},
		{"hadoop.security.authentication", auth},
	}
	hdfsSite := []property{
		{"dfs.replication", strconv.Itoa(c.cfg.Replication)},
		{"dfs.blocksize", strconv.FormatInt(c.cfg.BlockSize, 10)},
		{"dfs.client.use.datanode.hostname", "false"},
	}
	if c.cfg.KerberosPrincipal != "" {
		hdfsSite = append(hdfsSite, property{"dfs.namenode.kerberos.principal", c.cfg.KerberosPrincipal})
	}
	if c.cfg.DataTransferProtection != "" {
		hdfsSite = append(hdfsSite,
			property{"dfs.block.access.token.enable", "true"},
			property{"dfs.data.transfer.protection", c.cfg.DataTransferProtection})
	}
	if c.cfg.DataTransferCipherSuites != "" {
		hdfsSite = append(hdfsSite, property{"dfs.encrypt.data.transfer.cipher.suites", c.cfg.DataTransferCipherSuites})
	}
	if len(c.nnAddrs) > 1 {
		ns := c.cfg.Nameservice
		var ids []string
		for i := range c.nnAddrs {
			ids = append(ids, fmt.Sprintf("nn%d", i))
		}
		hdfsSite = append(hdfsSite,
			property{"dfs.nameservices", ns},
			property{"dfs.ha.namenodes." + ns, strings.Join(ids, ",")},
			property{"dfs.client.failover.proxy.provider." + ns, "org.apache.hadoop.hdfs.server.namenode.ha.ConfiguredFailoverProxyProvider"},
		)
		for i, a := range c.nnAddrs {
			hdfsSite = append(hdfsSite, property{"dfs.namenode.rpc-address." + ns + "." + ids[i], a})
		}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("hdfstest: write configuration: %w", err)
	}
	for name, props := range map[string][]property{"core-site.xml": core, "hdfs-site.xml": hdfsSite} {
		if err := writeSite(filepath.Join(dir, name), props); err != nil {
			return err
		}
	}
	return nil
}

type property struct {
	Name  string `xml:"name"`
	Value string `xml:"value"`
}

func writeSite(p string, props []property) error {
	doc := struct {
		XMLName    xml.Name   `xml:"configuration"`
		Properties []property `xml:"property"`
	}{Properties: props}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("hdfstest: encode %s: %w", p, err)
	}
	out := append([]byte(xml.Header+"<!-- Written by the Spindle test HDFS. -->\n"), b...)
	if err := os.WriteFile(p, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("hdfstest: write %s: %w", p, err)
	}
	return nil
}
