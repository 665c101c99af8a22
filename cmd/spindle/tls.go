package main

import (
	"fmt"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"

	"github.com/spindle-ml/spindle/internal/config"
	"github.com/spindle-ml/spindle/internal/tlsgen"
)

// tlsCommand makes the certificates of a standalone cluster's mutual TLS.
func tlsCommand() *cli.Command {
	return &cli.Command{
		Name:  "tls",
		Usage: "make certificates for the standalone cluster's mutual TLS (spindle.cluster.tls.*)",
		Description: "Once:   spindle tls ca --dir /etc/spindle/tls-ca\n" +
			"Per node (masters, workers, gateways):\n" +
			"        spindle tls cert --ca-dir /etc/spindle/tls-ca --name master-1 --hosts master-1.example,10.0.0.5 --out /etc/spindle/tls\n" +
			"then copy the node's two files and the CA's ca.pem (never ca-key.pem) to it, and set the three keys cert prints.",
		Subcommands: []*cli.Command{
			{
				Name:  "ca",
				Usage: "make a certificate authority (ca.pem, ca-key.pem) in a directory",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "dir", Required: true, Usage: "`DIR` to write ca.pem and ca-key.pem into (created if missing)"},
					&cli.StringFlag{Name: "name", Value: "Spindle cluster CA", Usage: "the CA's common name"},
					&cli.DurationFlag{Name: "validity", Value: tlsgen.DefaultValidity, Usage: "how long the CA stays valid"},
				},
				Action: func(c *cli.Context) error {
					if c.Duration("validity") <= 0 {
						return cli.Exit("--validity: must be positive", exitUsage)
					}
					if err := tlsgen.CreateCA(c.String("dir"), c.String("name"), c.Duration("validity")); err != nil {
						return cli.Exit(err, exitUsage)
					}
					fmt.Fprintf(c.App.Writer, "wrote %s/%s and %s/%s (keep the key on this machine only)\n",
						c.String("dir"), tlsgen.CAFile, c.String("dir"), tlsgen.CAKeyFile)
					return nil
				},
			},
			{
				Name:  "cert",
				Usage: "make a node's certificate, signed by the CA, for servers and clients alike",
				Flags: []cli.Flag{
					&cli.StringFlag{Name: "ca-dir", Required: true, Usage: "`DIR` holding the CA (spindle tls ca)"},
					&cli.StringFlag{Name: "name", Required: true, Usage: "the node's name: the files are NAME.pem and NAME-key.pem"},
					&cli.StringFlag{Name: "hosts", Value: "localhost,127.0.0.1", Usage: "comma-separated host names and IP addresses others reach the node at"},
					&cli.StringFlag{Name: "out", Value: ".", Usage: "`DIR` to write the files into (created if missing)"},
					&cli.DurationFlag{Name: "validity", Value: tlsgen.DefaultValidity, Usage: "how long the certificate stays valid (at most as long as the CA)"},
				},
				Action: func(c *cli.Context) error {
					if c.Duration("validity") <= 0 {
						return cli.Exit("--validity: must be positive", exitUsage)
					}
					// Absolute, so the printed settings work from anywhere.
					caDir, err := filepath.Abs(c.String("ca-dir"))
					if err != nil {
						return cli.Exit(err, exitUsage)
					}
					out, err := filepath.Abs(c.String("out"))
					if err != nil {
						return cli.Exit(err, exitUsage)
					}
					f, err := tlsgen.CreateCert(caDir, out, c.String("name"), strings.Split(c.String("hosts"), ","), c.Duration("validity"))
					if err != nil {
						return cli.Exit(err, exitUsage)
					}
					fmt.Fprintf(c.App.Writer, "wrote %s and %s; in the node's spindle-defaults.conf:\n", f.Cert, f.Key)
					fmt.Fprintf(c.App.Writer, "%s %s\n%s %s\n%s %s\n", config.KeyClusterTLSCert, f.Cert, config.KeyClusterTLSKey, f.Key, config.KeyClusterTLSCA, f.CA)
					return nil
				},
			},
		},
	}
}
