package client

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// ErrConfig reports a Hadoop configuration that does not say how to reach
// the ResourceManager.
var ErrConfig = errors.New("yarn: bad Hadoop configuration")

// Conf is a Hadoop client configuration: properties from the *-site.xml
// files of one directory.
type Conf struct {
	// Dir is where the files were read from.
	Dir   string
	props map[string]string
}

// confFiles are read in order; a later file's value wins, as in Hadoop.
var confFiles = []string{"core-site.xml", "hdfs-site.xml", "yarn-site.xml"}

// LoadConf reads dir's Hadoop XML files; dir empty means $HADOOP_CONF_DIR.
// A directory without yarn-site.xml is an error naming it.
func LoadConf(dir string) (*Conf, error) { return loadConf(dir, true) }

// LoadHDFSConf reads dir's Hadoop XML files as LoadConf does, for a
// client of HDFS alone: yarn-site.xml may be missing.
func LoadHDFSConf(dir string) (*Conf, error) { return loadConf(dir, false) }

func loadConf(dir string, needYARN bool) (*Conf, error) {
	if dir == "" {
		dir = os.Getenv("HADOOP_CONF_DIR")
	}
	if dir == "" {
		return nil, fmt.Errorf("%w: HADOOP_CONF_DIR is not set: point it at the directory holding the cluster's yarn-site.xml and core-site.xml (or set spindle.hadoop.confDir)", ErrConfig)
	}
	c := &Conf{Dir: dir, props: map[string]string{}}
	for _, name := range confFiles {
		path := filepath.Join(dir, name)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			if name == "yarn-site.xml" && needYARN {
				return nil, fmt.Errorf("%w: %s does not exist: HADOOP_CONF_DIR must hold the cluster's yarn-site.xml", ErrConfig, path)
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%w: read %s: %v", ErrConfig, path, err)
		}
		if err := c.parse(b); err != nil {
			return nil, fmt.Errorf("%w: %s: %v", ErrConfig, path, err)
		}
	}
	return c, nil
}

// ConfFromMap builds a configuration from properties, for tests and for
// configuration carried inside a container.
func ConfFromMap(props map[string]string) *Conf {
	c := &Conf{props: map[string]string{}}
	for k, v := range props {
		c.props[k] = v
	}
	return c
}

func (c *Conf) parse(b []byte) error {
	var doc struct {
		Props []struct {
			Name  string `xml:"name"`
			Value string `xml:"value"`
		} `xml:"property"`
	}
	if err := xml.Unmarshal(b, &doc); err != nil {
		return err
	}
	for _, p := range doc.Props {
		c.props[strings.TrimSpace(p.Name)] = strings.TrimSpace(p.Value)
	}
	return nil
}

var varRE = regexp.MustCompile(`\$\{([^}$]+)\}`)

// Get returns a property with ${var} references expanded (from other
// properties, then the environment), or def when it is unset.
func (c *Conf) Get(key, def string) string {
	v, ok := c.props[key]
	if !ok {
		v = def
	}
	for i := 0; i < 10 && strings.Contains(v, "${"); i++ {
		v = varRE.ReplaceAllStringFunc(v, func(m string) string {
			name := m[2 : len(m)-1]
			if x, ok := c.props[name]; ok {
				return x
			}
			if name == "yarn.resourcemanager.hostname" {
				return "0.0.0.0"
			}
			if x, ok := os.LookupEnv(name); ok {
				return x
			}
			return m
		})
	}
	return v
}

// Props returns a copy of every property, unexpanded.
func (c *Conf) Props() map[string]string {
	out := make(map[string]string, len(c.props))
	for k, v := range c.props {
		out[k] = v
	}
	return out
}

// where names the configuration's origin in errors.
func (c *Conf) where() string {
	if c.Dir == "" {
		return "the configuration"
	}
	return c.Dir
}

// RMAddrs returns the ResourceManagers' addresses for the client protocol
// (yarn.resourcemanager.address, port 8032), every one of an HA group.
func (c *Conf) RMAddrs() ([]string, error) {
	return c.rmAddrs("yarn.resourcemanager.address", "8032")
}

// SchedulerAddrs returns the ResourceManagers' addresses for
// ApplicationMasters (yarn.resourcemanager.scheduler.address, port 8030).
func (c *Conf) SchedulerAddrs() ([]string, error) {
	return c.rmAddrs("yarn.resourcemanager.scheduler.address", "8030")
}

// WebAddrs returns the ResourceManagers' web addresses (port 8088).
func (c *Conf) WebAddrs() ([]string, error) {
	return c.rmAddrs("yarn.resourcemanager.webapp.address", "8088")
}

func (c *Conf) rmAddrs(key, port string) ([]string, error) {
	if strings.EqualFold(c.Get("yarn.resourcemanager.ha.enabled", "false"), "true") {
		ids := c.Get("yarn.resourcemanager.ha.rm-ids", "")
		var out []string
		for _, id := range strings.Split(ids, ",") {
			if id = strings.TrimSpace(id); id == "" {
				continue
			}
			a := c.Get(key+"."+id, "")
			if a == "" {
				host := c.Get("yarn.resourcemanager.hostname."+id, "")
				if host == "" {
					return nil, fmt.Errorf("%w: ResourceManager %s of yarn.resourcemanager.ha.rm-ids has neither %s.%s nor yarn.resourcemanager.hostname.%s (%s)", ErrConfig, id, key, id, id, c.where())
				}
				a = net.JoinHostPort(host, port)
			}
			out = append(out, normalizeAddr(a))
		}
		if len(out) == 0 {
			return nil, fmt.Errorf("%w: yarn.resourcemanager.ha.enabled is true but yarn.resourcemanager.ha.rm-ids lists no ResourceManagers (%s)", ErrConfig, c.where())
		}
		return out, nil
	}
	a := c.Get(key, "${yarn.resourcemanager.hostname}:"+port)
	if _, p, err := net.SplitHostPort(a); err != nil || p == "0" {
		return nil, fmt.Errorf("%w: %s is %q (%s): want host:port", ErrConfig, key, a, c.where())
	}
	return []string{normalizeAddr(a)}, nil
}

// normalizeAddr turns a wildcard host (a server's bind address) into
// loopback, as Hadoop clients do.
func normalizeAddr(a string) string {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return a
	}
	if host == "0.0.0.0" || host == "" || host == "::" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port)
}
