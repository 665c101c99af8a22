package yarntest

import (
	"encoding/xml"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strconv"
)

// WriteConfig writes yarn-site.xml for this cluster into dir (beside the
// test HDFS's core-site.xml), ready to be HADOOP_CONF_DIR: the
// ResourceManager's client and scheduler addresses, the largest
// container, and on a Kerberized cluster the ResourceManager's principal.
func (c *Cluster) WriteConfig(dir string) error {
	host, _, _ := net.SplitHostPort(c.rmAddr)
	props := []property{
		{"yarn.resourcemanager.hostname", host},
		{"yarn.resourcemanager.address", c.rmAddr},
		{"yarn.resourcemanager.scheduler.address", c.schedAddr},
		{"yarn.scheduler.maximum-allocation-mb", strconv.Itoa(c.cfg.MaxAllocationMB)},
		{"yarn.nodemanager.resource.memory-mb", strconv.Itoa(c.cfg.Nodes[0].MemoryMB)},
		{"yarn.nodemanager.resource.cpu-vcores", strconv.Itoa(c.cfg.Nodes[0].VCores)},
	}
	if c.cfg.Principal != "" {
		props = append(props, property{"yarn.resourcemanager.principal", c.cfg.Principal})
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("yarntest: write configuration: %w", err)
	}
	doc := struct {
		XMLName    xml.Name   `xml:"configuration"`
		Properties []property `xml:"property"`
	}{Properties: props}
	b, err := xml.MarshalIndent(doc, "", "  ")
	if err != nil {
		return fmt.Errorf("yarntest: encode yarn-site.xml: %w", err)
	}
	p := filepath.Join(dir, "yarn-site.xml")
	out := append([]byte(xml.Header+"<!-- Written by the Spindle test YARN. -->\n"), b...)
	if err := os.WriteFile(p, append(out, '\n'), 0o644); err != nil {
		return fmt.Errorf("yarntest: write %s: %w", p, err)
	}
	return nil
}

type property struct {
	Name  string `xml:"name"`
	Value string `xml:"value"`
}
