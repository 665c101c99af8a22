package main

import "github.com/urfave/cli/v2"

// Placeholder until the test HDFS lands.
func miniclusterCommand() *cli.Command { return &cli.Command{Name: "minicluster", Hidden: true} }
